// HTTP and network RBAC through a real skua-proxy process: 403s with Envoy's body and details,
// shadow rules, per-route disable, x-forwarded-for as remote_ip, stats; TCP connections closed by
// source address and by destination port, with the deny in the tcp_proxy access log.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { cleanup, startProxy, type RunningProxy } from './lib/proxy.ts';
import { startHttpBackend, startTcpEcho, type Backend } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { bootstrap, chain, cluster, hcm, listener, T, tcpProxy, vhost } from './lib/config.ts';

const HTTP_RBAC = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBAC';
const RBAC_PER_ROUTE = 'type.googleapis.com/envoy.extensions.filters.http.rbac.v3.RBACPerRoute';
const NET_RBAC = 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC';
const any = { any: true };

/** As istiod emits them: the DENY filter first, then ALLOW, both named envoy.filters.http.rbac. */
const denyFilter = {
  name: 'envoy.filters.http.rbac',
  typed_config: {
    '@type': HTTP_RBAC,
    rules: { action: 'DENY', policies: { 'deny-admin': { permissions: [{ url_path: { path: { prefix: '/admin' } } }], principals: [any] } } },
    shadow_rules: { policies: { 'shadow-get': { permissions: [{ header: { name: ':method', string_match: { exact: 'GET' } } }], principals: [any] } } },
    shadow_rules_stat_prefix: 'istio_dry_run_allow_',
  },
};
const allowFilter = {
  name: 'envoy.filters.http.rbac',
  typed_config: {
    '@type': HTTP_RBAC,
    rules: {
      policies: {
        'allow-get': { permissions: [{ header: { name: ':method', string_match: { exact: 'GET' } } }], principals: [any] },
        'allow-partner': { permissions: [any], principals: [{ remote_ip: { address_prefix: '203.0.113.0', prefix_len: 24 } }] },
      },
    },
  },
};
const tcpLog = (tag: string) => [{ name: 'envoy.access_loggers.stdout', typed_config: { '@type': T.stdoutLog, log_format: { text_format: `${tag} %CONNECTION_TERMINATION_DETAILS% %UPSTREAM_HOST%\n` } } }];

function netRbac(statPrefix: string, rules: Record<string, unknown>): Record<string, unknown> {
  return { name: 'envoy.filters.network.rbac', typed_config: { '@type': NET_RBAC, stat_prefix: statPrefix, rules } };
}

describe('RBAC filters (e2e)', { timeout: 60_000 }, () => {
  let backend: Backend, echo: Backend, proxy: RunningProxy, base: string;

  before(async () => {
    backend = await startHttpBackend('rbac-backend');
    echo = await startTcpEcho();
    proxy = await startProxy((p) => bootstrap([
      listener(p('http'), [chain(hcm([vhost([
        { match: { prefix: '/open' }, route: { cluster: 'backend' }, typed_per_filter_config: { 'envoy.filters.http.rbac': { '@type': RBAC_PER_ROUTE } } },
        { match: { prefix: '/' }, route: { cluster: 'backend' } },
      ])], {
        statPrefix: 'rbac_e2e',
        extra: {
          access_log: [{ name: 'envoy.access_loggers.stdout', typed_config: { '@type': T.stdoutLog, log_format: { text_format: 'RBACLOG %RESPONSE_CODE% %RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %REQ(:PATH)%\n' } } }],
          http_filters: [denyFilter, allowFilter, { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
        },
      }))]),
      listener(p('tcp1'), [{ filters: [
        netRbac('tcp.', { action: 'DENY', policies: { 'deny-127.0.0.2': { permissions: [any], principals: [{ direct_remote_ip: { address_prefix: '127.0.0.2', prefix_len: 32 } }] } } }),
        tcpProxy('echo', { access_log: tcpLog('TCP1LOG') }),
      ] }]),
      listener(p('tcp2'), [{ filters: [
        netRbac('tcp2', { policies: { 'port-1-only': { permissions: [{ destination_port: 1 }], principals: [any] } } }),
        tcpProxy('echo', { access_log: tcpLog('TCP2LOG') }),
      ] }]),
    ], [cluster('backend', [backend.port]), cluster('echo', [echo.port])]), { ports: ['http', 'tcp1', 'tcp2'] });
    base = `http://127.0.0.1:${proxy.ports.http}`;
  });
  after(() => cleanup(() => proxy?.stop(), () => backend?.close(), () => echo?.close()));

  test('an allowed request reaches the backend', async () => {
    const r = await request(`${base}/hello`);
    assert.equal(r.status, 200);
    assert.match(r.text, /rbac-backend/);
  });

  test('a DENY policy match: 403 "RBAC: access denied", details name the policy, no response flag', async () => {
    const r = await request(`${base}/admin/panel`);
    assert.equal(r.status, 403);
    assert.equal(r.text, 'RBAC: access denied');
    assert.equal(r.headers['content-type'], 'text/plain');
    const line = await proxy.waitForStdout(/^RBACLOG 403 .* \/admin\/panel$/m);
    assert.equal(line.trim(), 'RBACLOG 403 - rbac_access_denied_matched_policy[deny-admin] /admin/panel');
  });

  test('ALLOW without a matching policy denies with [none]', async () => {
    const r = await request(`${base}/hello`, { method: 'POST', body: 'x' });
    assert.equal(r.status, 403);
    assert.equal(r.text, 'RBAC: access denied');
    const line = await proxy.waitForStdout(/^RBACLOG 403 - rbac_access_denied_matched_policy\[none\] \/hello$/m);
    assert.ok(line);
  });

  test('remote_ip is the x-forwarded-for client (use_remote_address off)', async () => {
    const r = await request(`${base}/hello`, { method: 'POST', body: 'x', headers: { 'x-forwarded-for': '198.51.100.7, 203.0.113.9' } });
    assert.equal(r.status, 200);
    const other = await request(`${base}/hello`, { method: 'POST', body: 'x', headers: { 'x-forwarded-for': '203.0.113.9, 198.51.100.7' } });
    assert.equal(other.status, 403, 'only the last entry counts');
  });

  test('RBACPerRoute without rbac turns both filters off for the route', async () => {
    const r = await request(`${base}/open/admin`, { method: 'DELETE' });
    assert.equal(r.status, 200);
  });

  test('stats as Envoy names them, shared by the two filters; shadow stats under the dry-run prefix', async () => {
    // Requests so far that reached the filters: GET /hello, GET /admin/panel, POST /hello ×3.
    // DENY filter: 4 allowed, 1 denied. ALLOW filter: GET /hello + the partner POST allowed, 2 POSTs denied.
    assert.equal(await proxy.stat('http.rbac_e2e.rbac.allowed'), 6);
    assert.equal(await proxy.stat('http.rbac_e2e.rbac.denied'), 3);
    assert.equal(await proxy.stat('http.rbac_e2e.rbac.istio_dry_run_allow_shadow_allowed'), 2);
    assert.equal(await proxy.stat('http.rbac_e2e.rbac.istio_dry_run_allow_shadow_denied'), 3);
  });

  test('network RBAC: a denied source address is closed before any upstream connection; others pass', async () => {
    const ok = await talk(proxy.ports.tcp1, '127.0.0.1', 'ping');
    assert.equal(ok.data, 'ping');
    const denied = await talk(proxy.ports.tcp1, '127.0.0.2', 'ping');
    assert.equal(denied.data, '');
    assert.ok(denied.closed);
    const line = await proxy.waitForStdout(/^TCP1LOG rbac_access_denied_matched_policy/m);
    assert.equal(line.trim(), 'TCP1LOG rbac_access_denied_matched_policy[deny-127.0.0.2] -');
    assert.equal(await proxy.stat('tcp.rbac.allowed'), 1);
    assert.equal(await proxy.stat('tcp.rbac.denied'), 1);
  });

  test('network RBAC: ALLOW on another destination port closes every connection ([none])', async () => {
    const denied = await talk(proxy.ports.tcp2, '127.0.0.1', 'ping');
    assert.equal(denied.data, '');
    assert.ok(denied.closed);
    await proxy.waitForStdout(/^TCP2LOG rbac_access_denied_matched_policy\[none\] -$/m);
    assert.equal(await proxy.stat('tcp2.rbac.denied'), 1, 'a stat_prefix without a dot gets one (statPrefixJoin)');
  });
});

/** Connects from `localAddress`, writes, and collects what comes back until close or 1 s of quiet. */
function talk(port: number, localAddress: string, msg: string): Promise<{ data: string; closed: boolean }> {
  return new Promise((resolve, reject) => {
    const s: Socket = connect({ host: '127.0.0.1', port, localAddress });
    let data = '';
    let timer: NodeJS.Timeout | undefined;
    const finish = (closed: boolean): void => { if (timer) clearTimeout(timer); s.destroy(); resolve({ data, closed }); };
    s.on('error', (e: NodeJS.ErrnoException) => { if (e.code === 'ECONNRESET' || e.code === 'EPIPE') finish(true); else reject(e); });
    s.on('data', (b) => {
      data += b.toString();
      if (data === msg) finish(false);
    });
    s.on('close', () => finish(true));
    s.on('connect', () => { s.write(msg); timer = setTimeout(() => finish(false), 1000); });
  });
}
