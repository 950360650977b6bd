// The binaries as a user meets them: --help on every binary and subcommand (exit 0, the flags on
// stdout), -l and --component-log-level deciding which request and failure lines appear,
// --log-format / --log_as_json shaping every line, start-up lines naming admin and the listeners,
// and start-up failures (a port in use, a missing file or directory, a bad flag) as one line with
// what to do, never a stack trace; skua-ztunnel's help names every environment variable it reads.
// Real processes: skua-proxy, skua-controlplane and skua-ztunnel from
// node_modules/.bin, a real HTTP backend and real requests.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer, type AddressInfo, type Server } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { cleanup, freePort, repoRoot, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, type Backend } from './lib/backends.ts';
import { cluster, hcm, listener, chain, routeTo, vhost } from './lib/config.ts';

const BIN = path.join(repoRoot, 'node_modules', '.bin');

interface Run { code: number | null; stdout: string; stderr: string }

function runBin(bin: string, args: readonly string[], timeoutMs = 20_000): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(BIN, bin), args, { cwd: repoRoot, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '', stderr = '';
    child.stdout.setEncoding('utf8').on('data', (d: string) => { stdout += d; });
    child.stderr.setEncoding('utf8').on('data', (d: string) => { stderr += d; });
    const timer = setTimeout(() => { child.kill('SIGKILL'); reject(new Error(`${bin} ${args.join(' ')} did not exit in ${timeoutMs} ms: ${stderr}`)); }, timeoutMs);
    child.on('exit', (code) => { clearTimeout(timer); resolve({ code, stdout, stderr }); });
  });
}

const STACK_FRAME = /^\s+at .+:\d+:\d+\)?$/m;

/** A start-up failure as the user should see it: exit `code`, one line, then at most a usage hint; no stack. */
function assertOneLine(r: Run, code: number, says: RegExp): void {
  assert.equal(r.code, code, `exit code; stderr:\n${r.stderr}`);
  assert.doesNotMatch(r.stderr, STACK_FRAME, `a stack trace:\n${r.stderr}`);
  const lines = r.stderr.trim().split('\n');
  // Log lines (timestamped) are not the error; usage hints may follow it.
  const errors = lines.filter((l) => !/^\(.*\)$/.test(l) && !/^\s*usage: /.test(l) && !/^\s+skua-/.test(l) && !/^(\[\d{4}-|\d{4}-\d\d-\d\dT)/.test(l));
  assert.equal(errors.length, 1, `one error line expected:\n${r.stderr}`);
  assert.match(errors[0], says);
}

describe('--help on every binary and subcommand', { concurrency: 4, timeout: 120_000 }, () => {
  const cases: Array<[string, string[], RegExp]> = [
    ['skua-proxy', ['--help'], /--component-log-level[\s\S]*--log-format[\s\S]*--log_as_json/],
    ['skua-proxy', ['-h'], /--config-path/],
    ['skua-proxy', ['proxy', '--help'], /usage: skua-proxy proxy[\s\S]*--proxyComponentLogLevel[\s\S]*--log_as_json/],
    ['skua-proxy', ['proxy', 'sidecar', '-h'], /usage: skua-proxy proxy/],
    ['skua-proxy', ['wait', '--help'], /--timeoutSeconds/],
    ['skua-proxy', ['istio-iptables', '--help'], /--inbound-capture-port/],
    ['skua-proxy', ['istio-clean-iptables', '--help'], /usage:/],
    ['skua-controlplane', ['--help'], /--istio DIR[\s\S]*--ca-address[\s\S]*--state-dir[\s\S]*--trust-domain/],
    ['skua-controlplane', ['-h'], /usage: skua-controlplane/],
    ['skua-controlplane', ['help'], /usage: skua-controlplane/],
    ['skua-controlplane', ['token', '--help'], /--service-account/],
    ['skua-controlplane', ['validate', '--help'], /--errors-only/],
    ['skua-controlplane', ['apply', '--help'], /--namespace/],
    ['skua-controlplane', ['delete', '-h'], /apply\|delete/],
    ['skua-controlplane', ['compose-kube', '--help'], /--manifests/],
    ['skua-ztunnel', ['-h'], /usage: skua-ztunnel[\s\S]*proxy \(default\)[\s\S]*XDS_ADDRESS[\s\S]*CONNECTION_TERMINATION_DEADLINE/],
    ['skua-ztunnel', ['--help'], /Commands:[\s\S]*version[\s\S]*cni-standin[\s\S]*Environment variables/],
    ['skua-ztunnel', ['help'], /usage: skua-ztunnel/],
    // `proxy --help` prints help and exits: it must not start the proxy (runBin would time out).
    ['skua-ztunnel', ['proxy', '--help'], /usage: skua-ztunnel[\s\S]*LOCAL_XDS_PATH/],
    ['skua-ztunnel', ['proxy', '-h'], /usage: skua-ztunnel/],
    ['skua-ztunnel', ['cni-standin', '--help'], /usage: skua-ztunnel cni-standin[\s\S]*--socket[\s\S]*--pod[\s\S]*--plugin-socket[\s\S]*--apply-rules/],
    ['skua-ztunnel', ['cni-plugin', '--help'], /usage: skua-ztunnel cni-plugin[\s\S]*--pod[\s\S]*--plugin-socket[\s\S]*--timeout/],
    ['skua-waypoint', ['--help'], /usage: skua-waypoint[\s\S]*15008[\s\S]*15021 \/healthz\/ready/],
    ['skua-waypoint', ['proxy', 'waypoint', '-h'], /usage: skua-waypoint/],
  ];
  for (const [bin, args, says] of cases) {
    test(`${bin} ${args.join(' ')} → exit 0, the flags on stdout`, async () => {
      const r = await runBin(bin, args);
      assert.equal(r.code, 0, `stderr:\n${r.stderr}`);
      assert.match(r.stdout, says);
      assert.doesNotMatch(r.stderr, STACK_FRAME);
    });
  }
});

test('packages/controlplane/README.md documents every flag skua-controlplane\'s --help texts name', async () => {
  const readme = readFileSync(path.join(repoRoot, 'packages', 'controlplane', 'README.md'), 'utf8');
  const missing: string[] = [];
  for (const args of [['--help'], ['validate', '--help'], ['token', '--help'], ['apply', '--help'], ['compose-kube', '--help']]) {
    const r = await runBin('skua-controlplane', args);
    assert.equal(r.code, 0, r.stderr);
    for (const flag of new Set(r.stdout.match(/--[a-zA-Z][\w-]*/g) ?? [])) {
      if (!readme.includes(`\`${flag}`) && !readme.includes(` ${flag} `)) missing.push(`${args[0]}: ${flag}`);
    }
  }
  assert.deepEqual(missing, []);
});

test("skua-ztunnel --help names every environment variable its source reads", async () => {
  // The names the ztunnel's code reads: config helpers (str/int/bool/durationMs/rootCert/headers),
  // env.X / process.env.X, prefixes (startsWith), and proxyMetadata keys.
  const src = path.join(repoRoot, 'packages', 'ztunnel', 'src');
  const read = new Set<string>();
  const patterns = [/\b(?:str|int|bool|durationMs|rootCert|headers)\(env, '([A-Z][A-Z0-9_]*)'/g, /\benv\.([A-Z][A-Z0-9_]+)/g, /startsWith\('([A-Z][A-Z0-9_]+)'\)/g, /proxyMetadata\.([A-Z][A-Z0-9_]+)/g];
  for (const file of readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && f !== 'help.ts')) {
    const text = readFileSync(path.join(src, file), 'utf8');
    for (const re of patterns) for (const m of text.matchAll(re)) read.add(m[1]);
  }
  assert.ok(read.size > 35, `found only ${[...read].join(' ')}`);
  const r = await runBin('skua-ztunnel', ['--help']);
  assert.equal(r.code, 0, r.stderr);
  const missing = [...read].filter((name) => !new RegExp(`\\b${name}`).test(r.stdout));
  assert.deepEqual(missing, [], 'variables read but not in --help');
});

test('skua-ztunnel: an unknown command is one line and exit 2; `version` prints the version', async () => {
  const bad = await runBin('skua-ztunnel', ['frobnicate']);
  assert.equal(bad.code, 2);
  assert.match(bad.stderr.split('\n')[0], /^skua-ztunnel: unknown command "frobnicate"$/);
  assert.doesNotMatch(bad.stderr, STACK_FRAME);
  const v = await runBin('skua-ztunnel', ['version']);
  assert.equal(v.code, 0);
  assert.match(v.stdout, /^skua-ztunnel \d+\.\d+\.\d+\n$/);
  const pod = await runBin('skua-ztunnel', ['cni-standin', '--pod', 'nonsense']);
  assertOneLine(pod, 2, /^skua-ztunnel cni-standin: --pod "nonsense": expected namespace\/name\/service-account=NETNS$/);
  const none = await runBin('skua-ztunnel', ['cni-standin']);
  assertOneLine(none, 2, /^skua-ztunnel cni-standin: give at least one --pod, or --plugin-socket$/);
  const plugin = await runBin('skua-ztunnel', ['cni-plugin']);
  assertOneLine(plugin, 2, /^skua-ztunnel cni-plugin: give --pod namespace\/name\/service-account$/);
});

describe('start-up failures: one line that says what to do', { concurrency: 4, timeout: 120_000 }, () => {
  let busy: Server;
  let busyPort = 0;
  let dir = '';
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'skua-cli-surface-'));
    busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    busyPort = (busy.address() as AddressInfo).port;
  });
  after(() => { busy.close(); rmSync(dir, { recursive: true, force: true }); });

  const staticBootstrap = (port: number, adminPort: number): string => JSON.stringify({
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: adminPort } } },
    static_resources: { listeners: [listener(port, [chain(hcm([vhost([routeTo('backend')])]))], { name: 'ingress' })], clusters: [cluster('backend', [1])] },
  });

  test('skua-proxy: a listener port in use', async () => {
    assertOneLine(await runBin('skua-proxy', ['--config-yaml', staticBootstrap(busyPort, await freePort())]), 1,
      new RegExp(`cannot listen on 127\\.0\\.0\\.1:${busyPort}: the address is already in use; stop what holds it`));
  });

  test('skua-proxy: the admin port in use', async () => {
    assertOneLine(await runBin('skua-proxy', ['--config-yaml', staticBootstrap(await freePort(), busyPort)]), 1, new RegExp(`127\\.0\\.0\\.1:${busyPort}: the address is already in use`));
  });

  test('skua-proxy: a bootstrap that is a directory, one that does not exist', async () => {
    assertOneLine(await runBin('skua-proxy', ['-c', dir]), 1, /error initializing configuration '.*': cannot read .*: it is a directory, a file was expected/);
    assertOneLine(await runBin('skua-proxy', ['-c', path.join(dir, 'nope.yaml')]), 1, /nope\.yaml: no such file or directory; check the path/);
  });

  test('skua-proxy: no configuration, a bad component, a bad level', async () => {
    assertOneLine(await runBin('skua-proxy', []), 1, /no configuration: give a bootstrap with -c FILE or --config-yaml YAML/);
    assertOneLine(await runBin('skua-proxy', ['--config-yaml', '{}', '--component-log-level', 'upstrem:debug']), 1, /error: invalid component specified 'upstrem'/);
    assertOneLine(await runBin('skua-proxy', ['--config-yaml', '{}', '--component-log-level', 'upstream:loud']), 1, /error: invalid log level specified 'loud'/);
  });

  test('skua-controlplane: the xDS port and the CA port in use', async () => {
    assertOneLine(await runBin('skua-controlplane', ['--config-dir', dir, '--xds-address', `127.0.0.1:${busyPort}`]), 1,
      new RegExp(`cannot listen on 127\\.0\\.0\\.1:${busyPort}: the address is already in use`));
    assertOneLine(await runBin('skua-controlplane', ['--config-dir', dir, '--xds-address', '127.0.0.1:0', '--ca-address', `127.0.0.1:${busyPort}`]), 1,
      new RegExp(`cannot listen on 127\\.0\\.0\\.1:${busyPort}: the address is already in use`));
  });

  test('skua-controlplane: a missing --istio directory, an unknown flag, an unknown command, nothing to serve', async () => {
    assertOneLine(await runBin('skua-controlplane', ['--istio', path.join(dir, 'nope')]), 2, /--istio .*nope: no such directory; create it or check the path/);
    assertOneLine(await runBin('skua-controlplane', ['--istio', dir, '--xds', '1']), 2, /Unknown option '--xds'/);
    assertOneLine(await runBin('skua-controlplane', ['serve']), 2, /unknown command "serve"/);
    assertOneLine(await runBin('skua-controlplane', []), 2, /nothing to serve: give --istio DIR, --config-dir DIR, --mesh FILE or --ca-address HOST:PORT/);
    assertOneLine(await runBin('skua-controlplane', ['token', '--namespace', 'default']), 1, /--namespace and --service-account are required/);
  });
});

describe('logging: levels per component, formats, start-up lines', { timeout: 120_000 }, () => {
  let backend: Backend;
  before(async () => { backend = await startHttpBackend(); });
  after(() => backend?.close());

  const bootstrap = (p: (n: string) => number) => ({
    static_resources: {
      listeners: [listener(p('http'), [chain(hcm([vhost([routeTo('backend', '/ok'), routeTo('dead', '/dead')])]))], { name: 'ingress' })],
      clusters: [cluster('backend', [backend.port]), cluster('dead', [1])],
    },
  });

  async function withProxy(args: string[], logLevel: string, fn: (proxy: RunningProxy) => Promise<void>): Promise<void> {
    const proxy = await startProxy(bootstrap, { ports: ['http'], logLevel, args });
    try { await fn(proxy); } finally { await cleanup(() => proxy.stop()); }
  }

  const get = async (proxy: RunningProxy, p: string): Promise<number> => (await fetch(`http://127.0.0.1:${proxy.ports.http}${p}`)).status;

  test('-l info: start-up lines name admin and each listener with its port; no request lines', async () => {
    await withProxy([], 'info', async (proxy) => {
      assert.equal(await get(proxy, '/ok'), 200);
      const err = proxy.stderr();
      assert.match(err, new RegExp(`\\[info\\]\\[main\\] admin address: 127\\.0\\.0\\.1:${new URL(proxy.adminUrl).port}`));
      assert.match(err, new RegExp(`\\[info\\]\\[main\\] listener 'ingress' on 127\\.0\\.0\\.1:${proxy.ports.http}`));
      assert.doesNotMatch(err, /\[debug\]/);
    });
  });

  test('-l debug: a line per request (status, flags, cluster, host) and per upstream failure', async () => {
    await withProxy([], 'debug', async (proxy) => {
      assert.equal(await get(proxy, '/ok'), 200);
      assert.equal(await get(proxy, '/dead'), 503);
      assert.equal(await get(proxy, '/nowhere'), 404);
      await proxy.waitForStderr(/\/nowhere → 404/);
      const err = proxy.stderr();
      assert.match(err, new RegExp(`\\[debug\\]\\[http\\] \\[C\\d+\\] GET 127\\.0\\.0\\.1:${proxy.ports.http}/ok → 200 flags - cluster 'backend' host 127\\.0\\.0\\.1:${backend.port}`));
      assert.match(err, /\[debug\]\[router\] \[C\d+\] upstream 127\.0\.0\.1:1 for GET .*\/dead: connect-failure \(ECONNREFUSED/);
      assert.match(err, /\[debug\]\[http\] \[C\d+\] GET .*\/dead → 503 flags UF details upstream_reset_before_response_started\{ECONNREFUSED\}/);
      assert.match(err, /\[debug\]\[http\] \[C\d+\] GET .*\/nowhere → 404 flags NR details route_not_found/);
    });
  });

  test('--component-log-level http:debug under -l info: http lines only; router stays at info', async () => {
    await withProxy(['--component-log-level', 'http:debug'], 'info', async (proxy) => {
      assert.equal(await get(proxy, '/dead'), 503);
      await proxy.waitForStderr(/\/dead → 503/);
      const err = proxy.stderr();
      assert.match(err, /\[debug\]\[http\] .*\/dead → 503 flags UF/);
      assert.doesNotMatch(err, /\[router\]/);
    });
  });

  test('-l trace: the request as it arrives', async () => {
    await withProxy([], 'trace', async (proxy) => {
      assert.equal(await get(proxy, '/ok'), 200);
      assert.match(proxy.stderr(), /\[trace\]\[http\] \[C\d+\] request GET http:\/\/127\.0\.0\.1:\d+\/ok HTTP\/1\.1 from 127\.0\.0\.1:\d+/);
    });
  });

  test('POST /logging: every logger listed; ?router=debug turns one on, ?level= all', async () => {
    await withProxy([], 'info', async (proxy) => {
      const list = await proxy.admin('/logging', 'POST');
      assert.match(list.body, /active loggers:\n(?: {2}\w+: info\n)+/);
      assert.match(list.body, / {2}http: info\n[\s\S]* {2}upstream: info\n/);
      assert.equal((await proxy.admin('/logging?router=debug', 'POST')).status, 200);
      assert.equal(await get(proxy, '/dead'), 503);
      assert.match(proxy.stderr(), /\[debug\]\[router\] .*connect-failure/);
      assert.doesNotMatch(proxy.stderr(), /\[debug\]\[http\]/);
      assert.equal((await proxy.admin('/logging?nosuch=debug', 'POST')).status, 404);
      assert.match((await proxy.admin('/logging?level=warning', 'POST')).body, / {2}router: warning\n/);
    });
  });

  test('--log-format with %j: every line is JSON, messages escaped', async () => {
    await withProxy(['--log-format', '{"t":"%Y-%m-%dT%T.%eZ","level":"%l","logger":"%n","msg":"%j"}'], 'debug', async (proxy) => {
      assert.equal(await get(proxy, '/ok'), 200);
      assert.equal(await get(proxy, '/nowhere'), 404);
      await proxy.waitForStderr(/\/nowhere → 404/);
      const lines = proxy.stderr().trim().split('\n');
      assert.ok(lines.length >= 3, proxy.stderr());
      const parsed = lines.map((l) => JSON.parse(l) as { t: string; level: string; logger: string; msg: string });
      assert.ok(parsed.every((p) => /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/.test(p.t)));
      assert.ok(parsed.some((p) => p.level === 'debug' && p.logger === 'http' && p.msg.includes('/nowhere → 404')));
    });
  });

  test('--log_as_json: Istio\'s JSON lines', async () => {
    await withProxy(['--log_as_json'], 'info', async (proxy) => {
      const first = JSON.parse(proxy.stderr().trim().split('\n')[0]) as Record<string, string>;
      assert.deepEqual(Object.keys(first), ['level', 'time', 'scope', 'msg']);
      assert.equal(first.scope, 'envoy main');
      assert.match(first.msg, /skua-proxy .* starting/);
    });
  });
});
