// @skua/proxy's public API is its export map: a handful of entry modules in src/api/, each opening
// with a header. Code outside packages/proxy imports only those (by `@skua/proxy/<entry>`, or from
// the repo root, which is no workspace package, by a relative path to the same src/api file);
// nothing inside the proxy imports src/api (entry modules are leaves at the top); core modules
// never import an extension (filters/*). Node itself refuses a deep path: checked with a real import.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const PROXY = join(ROOT, 'packages/proxy');
const PROXY_SRC = join(PROXY, 'src');
const API_DIR = join(PROXY_SRC, 'api');

/**
 * The proxy's own white-box tools that live at the repo root and drive internals on purpose; each
 * says what it needs. Everything else outside packages/proxy goes through the entry modules.
 */
const WHITE_BOX: ReadonlyMap<string, string> = new Map([
  ['fuzz/', 'fuzz targets feed the parsers and config compilers directly'],
  ['bench/micro/h1-parse.bench.ts', 'micro-benchmark of the HTTP/1.1 head parser'],
  ['bench/micro/lb.bench.ts', 'micro-benchmark of the load balancers'],
  ['bench/micro/route-match.bench.ts', 'micro-benchmark of the route table'],
  ['bench/micro/istio-stats.bench.ts', "micro-benchmark of Istio's stats filter"],
  ['test/overload.test.ts', "reads the overload manager's state"],
  ['test/istio-telemetry.test.ts', 'speaks the metadata-exchange wire format as a peer would'],
  ['test/pod-mesh.test.ts', "compares against Istio's label sets as the stats filter defines them"],
  ['test/ext-authz.test.ts', 'loads the ext_authz protos for its test server'],
  ['test/pod-dns.test.ts', "runs the agent's DNS proxy parts in a network namespace"],
  ['test/xds-eds-work.test.ts', 'counts the EDS work (cluster walks, deliveries) of an in-process server'],
]);

const SKIP_DIRS = new Set(['node_modules', '.git', 'results', 'corpus', 'regressions', 'dict']);

function walk(dir: string, out: string[] = []): string[] {
  for (const name of readdirSync(dir)) {
    if (SKIP_DIRS.has(name)) continue;
    const p = join(dir, name);
    if (statSync(p).isDirectory()) walk(p, out);
    else if (/\.(ts|js|mjs)$/.test(name)) out.push(p);
  }
  return out;
}

/** Every module specifier a file names: static imports, re-exports, side-effect and dynamic imports. */
function specifiers(text: string): string[] {
  const out: string[] = [];
  for (const m of text.matchAll(/(?:^|[\s;}])(?:import|export)\s[^'"`;]*?from\s*['"]([^'"]+)['"]/gm)) out.push(m[1]);
  for (const m of text.matchAll(/(?:^|[\s;])import\s*['"]([^'"]+)['"]/gm)) out.push(m[1]);
  for (const m of text.matchAll(/\bimport\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]);
  for (const m of text.matchAll(/typeof import\(\s*['"]([^'"]+)['"]\s*\)/g)) out.push(m[1]);
  return out;
}

const exportsMap = JSON.parse(readFileSync(join(PROXY, 'package.json'), 'utf8')).exports as Record<string, string>;
const entries = Object.keys(exportsMap).filter((k) => k !== './package.json').map((k) => k.slice(2));
const apiFiles = readdirSync(API_DIR).filter((f) => f.endsWith('.ts'));

test('the export map is a handful of entry modules in src/api, each with its header, re-exports only', () => {
  assert.ok(!('./*' in exportsMap), 'no wildcard export');
  assert.ok(entries.length >= 4 && entries.length <= 10, `a handful of entries, got ${entries.length}`);
  for (const e of entries) assert.equal(exportsMap[`./${e}`], `./src/api/${e}.ts`, `./${e} → src/api/${e}.ts`);
  assert.deepEqual(apiFiles.map((f) => f.slice(0, -3)).sort(), [...entries].sort(), 'every src/api file is exported, and only those');
  for (const f of apiFiles) {
    const text = readFileSync(join(API_DIR, f), 'utf8');
    assert.match(text, new RegExp(`^/\\*\\*\\n \\* @skua/proxy/${f.slice(0, -3)} — \\S`), `${f} opens with its header`);
    const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/\/\/.*$/gm, '');
    for (const stmt of code.split(';').map((s) => s.trim()).filter(Boolean)) {
      assert.match(stmt, /^export (type )?(\{[\s\S]*\}|\*) from '\.\.\/[^']+'$|^export \{\}$/, `${f}: only re-exports, got ${stmt.slice(0, 80)}`);
    }
  }
});

test('outside packages/proxy, only entry modules are imported', () => {
  const bad: string[] = [];
  const files = walk(ROOT).filter((f) => !f.startsWith(PROXY + sep));
  assert.ok(files.length > 100, `scanned ${files.length} files`);
  for (const file of files) {
    const rel = relative(ROOT, file);
    const whiteBox = [...WHITE_BOX.keys()].some((k) => rel === k || (k.endsWith('/') && rel.startsWith(k)));
    for (const spec of specifiers(readFileSync(file, 'utf8'))) {
      if (spec === '@skua/proxy' || spec.startsWith('@skua/proxy/')) {
        if (!entries.includes(spec.slice('@skua/proxy/'.length))) bad.push(`${rel}: ${spec} is not in the export map`);
      } else if (spec.startsWith('.')) {
        const target = resolve(dirname(file), spec);
        if (!target.startsWith(PROXY_SRC + sep)) continue;
        if (dirname(target) === API_DIR || whiteBox) continue;
        bad.push(`${rel}: ${spec} reaches into the proxy (use an entry module in packages/proxy/src/api)`);
      }
    }
  }
  assert.deepEqual(bad, []);
});

test('nothing inside the proxy imports an entry module; core modules import no extension', () => {
  const bad: string[] = [];
  const CORE = ['core', 'matchers', 'hbone', 'tls', 'policy', 'stats', 'sys', 'listener'];
  // Compiling Envoy's Listener proto looks filters up in the extension registry (the Envoy layer).
  const ENVOY_LAYER = [join('listener', 'config.ts')];
  for (const file of walk(PROXY_SRC)) {
    const rel = relative(PROXY_SRC, file);
    if (rel.startsWith(`api${sep}`)) continue;
    const area = rel.split(sep)[0];
    for (const spec of specifiers(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const target = relative(PROXY_SRC, resolve(dirname(file), spec));
      if (target.startsWith(`api${sep}`)) bad.push(`${rel} imports the entry module ${target}`);
      if (CORE.includes(area) && !ENVOY_LAYER.includes(rel) && target.startsWith(`filters${sep}`)) bad.push(`core module ${rel} imports the extension ${target}`);
    }
  }
  assert.deepEqual(bad, []);
});

test("node's resolution refuses a deep path and loads an entry module", () => {
  const run = (spec: string): string => execFileSync(process.execPath, ['--input-type=module', '-e',
    `import(${JSON.stringify(spec)}).then((m) => console.log('ok', Object.keys(m).length), (e) => console.log(e.code))`],
  { cwd: join(ROOT, 'packages/controlplane'), encoding: 'utf8' }).trim();
  assert.equal(run('@skua/proxy/core/errors.ts'), 'ERR_PACKAGE_PATH_NOT_EXPORTED');
  assert.equal(run('@skua/proxy/tls/x509.ts'), 'ERR_PACKAGE_PATH_NOT_EXPORTED');
  assert.match(run('@skua/proxy/core'), /^ok [1-9]/);
  assert.match(run('@skua/proxy/identity'), /^ok [1-9]/);
});
