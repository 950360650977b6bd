/**
 * Other builds of skua-ztunnel to bench beside the working tree: a git ref's packages/proxy and
 * packages/ztunnel, extracted with `git archive` (borrowing this checkout's node_modules and
 * native addons), each run through its own bin/skua-ztunnel.js — what ships.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, realpathSync, symlinkSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = new URL('../../../', import.meta.url).pathname;

/** `WORKTREE` (the files as they are now) or a git ref; resolves to the bin to run. */
export function ztunnelBinForRef(ref: string, tmp: string): string {
  if (ref === 'WORKTREE') { warmCompileCache(ROOT); return join(ROOT, 'packages/ztunnel/bin/skua-ztunnel.js'); }
  const dir = join(tmp, `ref-${ref.replace(/[^\w.-]/g, '_')}`);
  mkdirSync(dir, { recursive: true });
  const tar = execFileSync('git', ['-C', ROOT, 'archive', ref, 'package.json', 'packages/proxy/package.json', 'packages/proxy/src', 'packages/proxy/bin',
    'packages/ztunnel/package.json', 'packages/ztunnel/src', 'packages/ztunnel/bin'], { maxBuffer: 256 << 20 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(join(ROOT, 'node_modules'), join(dir, 'node_modules'));
  for (const p of ['proxy', 'ztunnel']) borrowDependencies(p, join(dir, `packages/${p}/node_modules`));
  symlinkSync(join(ROOT, 'packages/proxy/native'), join(dir, 'packages/proxy/native'));
  warmCompileCache(dir);
  return join(dir, 'packages/ztunnel/bin/skua-ztunnel.js');
}

/**
 * A package's node_modules for an older build: @skua/* packages from the ref itself, the rest this
 * checkout's entries for that package, plus any other workspace package's (a dependency may have moved since the ref — @peculiar/x509 went from the proxy to
 * the control plane — and the older build still imports it).
 */
function borrowDependencies(pkg: string, target: string): void {
  mkdirSync(target, { recursive: true });
  const packages = [pkg, ...readdirSync(join(ROOT, 'packages')).filter((p) => p !== pkg)];
  for (const p of packages) {
    const from = join(ROOT, 'packages', p, 'node_modules');
    if (!existsSync(from)) continue;
    for (const name of readdirSync(from)) {
      if (name.startsWith('.')) continue;
      const scoped = name.startsWith('@') ? readdirSync(join(from, name)).map((n) => `${name}/${n}`) : [name];
      for (const entry of scoped) {
        if (existsSync(join(target, entry))) continue;
        mkdirSync(join(target, entry, '..'), { recursive: true });
        // The workspace's own packages come from the ref (pnpm links them to this checkout's).
        const own = entry.startsWith('@skua/') ? join(target, '../..', entry.slice('@skua/'.length)) : undefined;
        if (own !== undefined && !existsSync(own)) continue;
        symlinkSync(own ?? realpathSync(join(from, entry)), join(target, entry));
      }
    }
  }
}

/**
 * Node's compile cache is keyed by file, content and V8 flags: a build extracted to a new directory,
 * or a file just edited, starts cold and would load type stripping's compiler (~20 MB more anonymous
 * memory) where a deployed build does not. The build's own warm-compile-cache.js (the image runs it)
 * or, for builds that have none, every ztunnel module and `version` loaded once.
 */
function warmCompileCache(dir: string): void {
  const own = join(dir, 'packages/ztunnel/bin/warm-compile-cache.js');
  if (existsSync(own)) { execFileSync(process.execPath, [own], { stdio: 'ignore', timeout: 60_000 }); return; }
  const src = join(dir, 'packages/ztunnel/src');
  const files = readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && f !== 'main.ts').map((f) => join(src, f));
  const api = join(dir, 'packages/proxy/src/api');
  files.push(...readdirSync(api).filter((f) => f.endsWith('.ts')).map((f) => join(api, f)));
  const script = `import { enableCompileCache } from 'node:module'; enableCompileCache();
    for (const u of ${JSON.stringify(files.map((f) => pathToFileURL(f).href))}) await import(u);`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script], { stdio: 'ignore', timeout: 60_000 });
  execFileSync(process.execPath, [join(dir, 'packages/ztunnel/bin/skua-ztunnel.js'), 'version'], { stdio: 'ignore', timeout: 60_000 });
}

/** The commit a ref names (WORKTREE: HEAD, marked dirty when the tree differs). */
export function describeRef(ref: string): string {
  const rev = execFileSync('git', ['-C', ROOT, 'rev-parse', '--short', ref === 'WORKTREE' ? 'HEAD' : ref], { encoding: 'utf8' }).trim();
  if (ref !== 'WORKTREE') return rev;
  const dirty = execFileSync('git', ['-C', ROOT, 'status', '--porcelain', 'packages/proxy/src', 'packages/ztunnel'], { encoding: 'utf8' }).trim() !== '';
  return dirty ? `${rev}+dirty` : rev;
}
