// The command line: --mode validate exit codes and messages (field path + type URL for an
// unsupported extension), --config-yaml, serve-mode config errors, and bad flags.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { runProxyCli, validate, type Json } from './lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, simpleHttp, tcpProxy, vhost } from './lib/config.ts';
import { toYaml } from './lib/yaml.ts';

const good = (): Json => simpleHttp(10080, 10081);

/** Error lines look like Envoy's: `error initializing configuration '<where>': <field path>: <what>`. */
function assertConfigError(r: { code: number | null; signal: NodeJS.Signals | null; stderr: string }, field: RegExp, what?: RegExp): void {
  assert.equal(r.code, 1, `expected exit 1 (signal ${r.signal}); stderr: ${r.stderr}`);
  assert.match(r.stderr, /error initializing configuration '[^']+': /);
  assert.match(r.stderr, field, `the message does not name the field: ${r.stderr}`);
  if (what) assert.match(r.stderr, what, `the message does not say what: ${r.stderr}`);
}

function withFirstFilter(doc: Json, edit: (typedConfig: Json) => void): Json {
  const l = ((doc.static_resources as Json).listeners as Json[])[0];
  const f = ((l.filter_chains as Json[])[0].filters as Json[])[0];
  edit(f.typed_config as Json);
  return doc;
}

describe('--mode validate', { timeout: 60_000, concurrency: 3 }, () => {
  test('a good bootstrap validates (YAML and JSON) with exit 0 and says OK', async () => {
    for (const format of ['yaml', 'json'] as const) {
      const r = await validate(good(), { format });
      assert.equal(r.code, 0, r.stderr);
      assert.match(r.stdout, /OK/);
    }
  });

  test('validate does not bind listener ports', async () => {
    const busy = createServer();
    await new Promise<void>((r) => busy.listen(0, '127.0.0.1', () => r()));
    try {
      const r = await validate(simpleHttp((busy.address() as AddressInfo).port, 1));
      assert.equal(r.code, 0, r.stderr);
    } finally {
      busy.close();
    }
  });

  test('--config-yaml alone, and merged over -c', async () => {
    const alone = await runProxyCli(['--config-yaml', JSON.stringify(good()), '--mode', 'validate']);
    assert.equal(alone.code, 0, alone.stderr);
    const dir = mkdtempSync(path.join(tmpdir(), 'skua-cli-'));
    try {
      const file = path.join(dir, 'base.yaml');
      writeFileSync(file, toYaml(good()));
      const extra = { static_resources: { clusters: [cluster('extra', [1])] } };
      const merged = await runProxyCli(['-c', file, '--config-yaml', JSON.stringify(extra), '--mode', 'validate']);
      assert.equal(merged.code, 0, merged.stderr);
      const dup = { static_resources: { clusters: [cluster('backend', [1])] } };
      assertConfigError(await runProxyCli(['-c', file, '--config-yaml', JSON.stringify(dup), '--mode', 'validate']), /clusters\[1\]\.name/, /duplicate/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('unsupported extensions: exit 1 naming the field path and the type URL', async () => {
    const ratelimit = 'type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit';
    const r1 = await validate(withFirstFilter(good(), (tc) => {
      tc.http_filters = [{ name: 'envoy.filters.http.local_ratelimit', typed_config: { '@type': ratelimit } }, ...(tc.http_filters as Json[])];
    }));
    assertConfigError(r1, /static_resources\.listeners\[0\]\.filter_chains\[0\]\.filters\[0\]\.typed_config\.http_filters\[0\]/, new RegExp(ratelimit.replace(/\./g, '\\.')));

    const redis = 'type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy';
    const r2 = await validate(bootstrap([listener(1, [chain({ name: 'envoy.filters.network.redis_proxy', typed_config: { '@type': redis, stat_prefix: 'r' } })])], []));
    assertConfigError(r2, /static_resources\.listeners\[0\]\.filter_chains\[0\]\.filters\[0\]/, /RedisProxy/);

    const pp = 'type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol';
    const r3 = await validate(bootstrap([listener(1, [chain(tcpProxy('c'))], { listenerFilters: [{ name: 'pp', typed_config: { '@type': pp } }] })], [cluster('c', [2])]));
    assertConfigError(r3, /static_resources\.listeners\[0\]\.listener_filters\[0\]/, /ProxyProtocol/);

    const alts = 'type.googleapis.com/envoy.extensions.transport_sockets.alts.v3.Alts';
    const r4 = await validate(bootstrap([], [cluster('c', [2], { extra: { transport_socket: { name: 'alts', typed_config: { '@type': alts } } } })]));
    assertConfigError(r4, /static_resources\.clusters\[0\]\.transport_socket/, /Alts/);

    const otel = 'type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig';
    const r5 = await validate(withFirstFilter(good(), (tc) => { tc.access_log = [{ name: 'otel', typed_config: { '@type': otel } }]; }));
    assertConfigError(r5, /typed_config\.access_log\[0\]\.typed_config/, /OpenTelemetryAccessLogConfig/);
  });

  test('unsupported behaviour-changing fields are refused, not ignored', async () => {
    const r1 = await validate(bootstrap([], [cluster('c', [2], { extra: { lb_policy: 'LOAD_BALANCING_POLICY_CONFIG' } })]));
    assertConfigError(r1, /static_resources\.clusters\[0\]\.lb_policy/, /LOAD_BALANCING_POLICY_CONFIG/);
    const r2 = await validate(bootstrap([], [cluster('c', [2], { extra: { health_checks: [{ timeout: '1s' }] } })]));
    assertConfigError(r2, /static_resources\.clusters\[0\]\.health_checks/);
    const r3 = await validate({ ...good(), dynamic_resources: { ads_config: {} } });
    assertConfigError(r3, /dynamic_resources/);
  });

  test('invalid configs: unknown cluster, duplicate listener, bad duration, bad enum, YAML syntax, missing file', async () => {
    assertConfigError(await validate(bootstrap([listener(1, [chain(hcm([vhost([routeTo('missing')])]))])], [])), /route\.cluster/, /unknown cluster 'missing'/);
    assertConfigError(await validate(bootstrap([listener(1, [chain(tcpProxy('c'))], { name: 'same' }), listener(2, [chain(tcpProxy('c'))], { name: 'same' })], [cluster('c', [3])])),
      /listeners\[1\]\.name/, /duplicate/);
    assertConfigError(await validate(bootstrap([], [cluster('c', [2], { connectTimeout: 'soon' })])), /clusters\[0\]\.connect_timeout/);
    assertConfigError(await validate(bootstrap([], [cluster('c', [2], { extra: { type: 'CARRIER_PIGEON' } })])), /clusters\[0\]\.type/, /CARRIER_PIGEON/);
    const dir = mkdtempSync(path.join(tmpdir(), 'skua-cli-'));
    try {
      const broken = path.join(dir, 'broken.yaml');
      writeFileSync(broken, 'static_resources:\n  listeners: [\n    - name: x\n');
      const r = await validate(broken);
      assert.equal(r.code, 1);
      assert.match(r.stderr, /broken\.yaml/);
      const missing = await validate(path.join(dir, 'nope.yaml'));
      assert.equal(missing.code, 1);
      assert.match(missing.stderr, /nope\.yaml/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  test('serve mode with an invalid config exits 1 without serving', async () => {
    const r = await runProxyCli(['--config-yaml', JSON.stringify(bootstrap([], [cluster('c', [2], { extra: { lb_policy: 'LOAD_BALANCING_POLICY_CONFIG' } })]))], 15_000);
    assert.equal(r.code, 1);
    assert.match(r.stderr, /lb_policy/);
  });
});

describe('command line flags', { timeout: 60_000, concurrency: 4 }, () => {
  const cfg = ['--config-yaml', JSON.stringify(good()), '--mode', 'validate'];
  for (const [name, args, stderr] of [
    ['an unknown flag', ['--bogus', ...cfg], /bogus/],
    ['--concurrency 0', ['--concurrency', '0', ...cfg], /concurrency/],
    ['--concurrency abc', ['--concurrency', 'abc', ...cfg], /concurrency/],
    ['an unknown --mode', ['--config-yaml', '{}', '--mode', 'dance'], /mode/],
    ['an unknown log level', ['-l', 'chatty', ...cfg], /chatty|level/],
    ['no configuration at all', ['--mode', 'validate'], /config/],
    ['a flag without its value', ['-c'], /-c|config-path/],
  ] as const) {
    test(`${name} → exit 1 with a message`, async () => {
      const r = await runProxyCli(args);
      assert.equal(r.code, 1, `stdout: ${r.stdout}\nstderr: ${r.stderr}`);
      assert.match(r.stderr, stderr);
    });
  }

  test('--version exits 0 and prints the version', async () => {
    const r = await runProxyCli(['--version']);
    assert.equal(r.code, 0);
    assert.match(r.stdout, /version: \d+\.\d+\.\d+/);
  });

  test('--help prints the usage and exits 0 (as Envoy does)', async () => {
    const r = await runProxyCli(['--help']);
    assert.match(r.stdout + r.stderr, /usage: skua-proxy/);
    assert.equal(r.code, 0);
  });

  test('Envoy flags istio-proxy passes are accepted', async () => {
    const r = await runProxyCli([...cfg, '--drain-time-s', '45', '--parent-shutdown-time-s', '60', '--service-cluster', 'c', '--service-node', 'n',
      '--local-address-ip-version', 'v4', '--disable-hot-restart', '--allow-unknown-static-fields', '--log-format', '%v', '--component-log-level', 'misc:error']);
    assert.equal(r.code, 0, r.stderr);
  });
});
