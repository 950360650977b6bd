/**
 * mTLS scenario: a pair of skua proxies as two sidecars (wrk → client sidecar →
 * server sidecar → nginx backend), with workload certificates from the local CA
 * through each proxy's secret manager (CA_ADDR, as istio-agent). Three cases, same
 * wrk load: the pair in plaintext, the pair with ISTIO_MUTUAL mTLS reusing upstream
 * connections, and mTLS with a new connection per request (max_requests_per_connection
 * 1), whose rate is the pair's mTLS handshakes/s (counted by the server's ssl.handshake).
 */
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { CertificateAuthority } from '../../packages/controlplane/src/ca/authority.ts';
import { startCaServer, type CaServer } from '../../packages/controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../packages/controlplane/src/ca/token.ts';
import { progress } from '../lib/progress.ts';
import { startProcess, stopProcess, tailOf, type Proc } from '../lib/procs.ts';
import { freePort, httpGet, waitForPort, waitForReady } from '../lib/net.ts';
import { BACKEND_BODY, nginxBackendConf } from '../lib/peer-configs.ts';
import { REPO_ROOT, SKUA_READY_TIMEOUT_MS, startNginx } from '../lib/targets.ts';
import { runWrk } from '../lib/wrk.ts';
import { workloadDir } from '../lib/workload.ts';
import type { CheckOutcome, Column, Options, Row, ScenarioResult } from '../lib/types.ts';

const CHECK_NAME = 'mTLS L7 req/s (connection reuse) >= 0.7x plaintext pair';
const MIN_RATIO = 0.7;
type Mode = 'plain' | 'mtls' | 'mtls-per-request';
const CASES: ReadonlyArray<{ mode: Mode; label: string }> = [
  { mode: 'plain', label: 'skua pair, plaintext' },
  { mode: 'mtls', label: 'skua pair, mTLS (reuse)' },
  { mode: 'mtls-per-request', label: 'skua pair, mTLS, new conn/request' },
];

const COLUMNS: Column[] = [
  { key: 'rps', title: 'req/s', digits: 0, better: 'higher' },
  { key: 'p50', title: 'p50 ms', digits: 3, better: 'lower' },
  { key: 'p99', title: 'p99 ms', digits: 3, better: 'lower' },
  { key: 'errors', title: 'errors', digits: 0, better: 'lower' },
  { key: 'handshakesPerSec', title: 'handshakes/s', digits: 0, better: 'higher' },
  { key: 'vsPlain', title: 'x plaintext', digits: 2, better: 'higher' },
];

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const sds = (name: string): object => ({ name, sds_config: { api_config_source: { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'sds-grpc' } }], transport_api_version: 'V3' } } });

function hcm(prefix: string, cluster: string): object {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': HCM, stat_prefix: prefix, codec_type: 'AUTO',
      route_config: { name: 'r', virtual_hosts: [{ name: 'vh', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster } }] }] },
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } }],
    },
  };
}

function staticCluster(name: string, port: number, extra: object = {}): object {
  return { name, type: 'STATIC', connect_timeout: '2s', load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } }, metadata: { filter_metadata: { 'envoy.transport_socket_match': { tlsMode: 'istio' } } } }] }] }, ...extra };
}

/** The server sidecar: inbound listener (mTLS chain as istiod writes it, or plaintext) → backend. */
function serverBootstrap(admin: number, port: number, backend: number, mtls: boolean): object {
  const tls = {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext',
      common_tls_context: {
        tls_params: { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3' },
        alpn_protocols: ['istio-peer-exchange', 'h2', 'http/1.1'],
        tls_certificate_sds_secret_configs: [sds('default')],
        combined_validation_context: { default_validation_context: { match_subject_alt_names: [{ prefix: 'spiffe://cluster.local/' }] }, validation_context_sds_secret_config: sds('ROOTCA') },
      },
      require_client_certificate: true,
    },
  };
  return {
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: admin } } },
    static_resources: {
      listeners: [{ name: 'inbound', address: { socket_address: { address: '127.0.0.1', port_value: port } }, filter_chains: [{ filters: [hcm('inbound', 'backend')], ...(mtls ? { transport_socket: tls } : {}) }] }],
      clusters: [staticCluster('backend', backend)],
    },
  };
}

/** The client sidecar: plaintext listener for wrk → the server sidecar, tlsMode-istio mTLS or plaintext. */
function clientBootstrap(admin: number, port: number, server: number, mode: Mode): object {
  const matches = [{
    name: 'tlsMode-istio', match: { tlsMode: 'istio' },
    transport_socket: {
      name: 'envoy.transport_sockets.tls',
      typed_config: {
        '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.UpstreamTlsContext',
        common_tls_context: {
          alpn_protocols: ['istio-peer-exchange', 'istio'],
          tls_certificate_sds_secret_configs: [sds('default')],
          combined_validation_context: { default_validation_context: { match_subject_alt_names: [{ exact: 'spiffe://cluster.local/ns/default/sa/server' }] }, validation_context_sds_secret_config: sds('ROOTCA') },
        },
        sni: 'outbound_.8080_._.server.default.svc.cluster.local',
      },
    },
  }];
  const extra = { ...(mode === 'plain' ? {} : { transport_socket_matches: matches }), ...(mode === 'mtls-per-request' ? { max_requests_per_connection: 1 } : {}) };
  return {
    admin: { address: { socket_address: { address: '127.0.0.1', port_value: admin } } },
    static_resources: {
      listeners: [{ name: 'outbound', address: { socket_address: { address: '127.0.0.1', port_value: port } }, filter_chains: [{ filters: [hcm('outbound', 'server')] }] }],
      clusters: [staticCluster('server', server, extra)],
    },
  };
}

interface Sidecar { proc: Proc; admin: number; port: number }

async function startSidecar(name: string, dir: string, bootstrap: object, admin: number, port: number, env: Record<string, string>, main: string): Promise<Sidecar> {
  const file = path.join(dir, 'bootstrap.json');
  writeFileSync(file, JSON.stringify(bootstrap, null, 2));
  const proc = startProcess(name, process.execPath, [path.resolve(REPO_ROOT, main), '-c', file, '--concurrency', '1', '-l', 'warn'], { cwd: dir, env });
  await waitForReady(admin, proc, SKUA_READY_TIMEOUT_MS);
  await waitForPort(port, proc, 2000);
  return { proc, admin, port };
}

async function handshakes(adminPort: number, listenerPort: number): Promise<number> {
  const r = await httpGet(adminPort, '/stats?filter=ssl.handshake');
  const m = new RegExp(`listener\\.127\\.0\\.0\\.1_${listenerPort}\\.ssl\\.handshake: (\\d+)`).exec(r.body);
  return m ? Number(m[1]) : 0;
}

async function measure(c: (typeof CASES)[number], opts: Options, root: string, backendPort: number, ca: { ca: CertificateAuthority; tokens: TokenAuthority; address: string }): Promise<Row> {
  const scope = `mtls ${c.mode}`;
  const row: Row = { target: 'skua', key: c.mode, label: c.label, metrics: {} };
  const dir = path.join(root, c.mode);
  const server = workloadDir(dir, 'server', ca.ca, ca.tokens, ca.address);
  const client = workloadDir(dir, 'client', ca.ca, ca.tokens, ca.address);
  const [sAdmin, sPort, cAdmin, cPort] = [await freePort(), await freePort(), await freePort(), await freePort()];
  const mtls = c.mode !== 'plain';
  const sb = serverBootstrap(sAdmin, sPort, backendPort, mtls), cb = clientBootstrap(cAdmin, cPort, sPort, c.mode);
  row.config = JSON.stringify({ server: sb, client: cb }, null, 2);
  const started: Sidecar[] = [];
  try {
    progress(scope, 'starting the server and client sidecars (certificates from the local CA)');
    started.push(await startSidecar('skua-server', server.dir, sb, sAdmin, sPort, server.env, opts.skuaMain));
    started.push(await startSidecar('skua-client', client.dir, cb, cAdmin, cPort, client.env, opts.skuaMain));
    const check = await httpGet(cPort, '/');
    if (check.status !== 200 || check.body !== BACKEND_BODY) throw new Error(`GET / through the pair answered ${check.status} "${check.body.slice(0, 80)}"`);
    const wrk = { threads: opts.threads, connections: opts.connections, seconds: opts.warmup };
    if (opts.warmup > 0) await runWrk(cPort, wrk);
    const before = await handshakes(sAdmin, sPort);
    progress(scope, `measuring: wrk -t${wrk.threads} -c${wrk.connections} -d${opts.duration}s --latency`);
    const t0 = performance.now();
    const r = await runWrk(cPort, { ...wrk, seconds: opts.duration });
    const secs = (performance.now() - t0) / 1000;
    const hs = (await handshakes(sAdmin, sPort)) - before;
    row.metrics = { rps: r.rps, p50: r.p50, p90: r.p90, p99: r.p99, errors: r.errors, requests: r.requests, handshakesPerSec: mtls ? hs / secs : 0 };
    progress(scope, `${Math.round(r.rps)} req/s, p99 ${r.p99} ms, ${Math.round(row.metrics.handshakesPerSec)} handshakes/s, errors ${r.errors}`);
  } catch (err) {
    const logs = started.map((s) => tailOf(s.proc)).join('\n');
    row.error = (err as Error).message + (logs ? `\n${logs}` : '');
    progress(scope, `FAILED: ${row.error}`);
  } finally {
    for (const s of started.reverse()) await stopProcess(s.proc);
  }
  return row;
}

export async function runMtls(opts: Options, dir: string): Promise<ScenarioResult> {
  const startedAt = new Date().toISOString();
  const t0 = performance.now();
  const backendPort = await freePort();
  const backendConf = nginxBackendConf(dir, backendPort);
  const backend = await startNginx('backend', dir, backendConf, backendPort);
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: path.join(dir, 'ca') });
  const tokens = TokenAuthority.create(path.join(dir, 'ca'));
  let caServer: CaServer | undefined;
  const rows: Row[] = [];
  try {
    caServer = await startCaServer({ ca, tokens, listen: '127.0.0.1:0' });
    progress('mtls', `local CA on 127.0.0.1:${caServer.port}; backend nginx on ${backendPort}`);
    for (const c of CASES) rows.push(await measure(c, opts, path.join(dir, 'mtls'), backendPort, { ca, tokens, address: `127.0.0.1:${caServer.port}` }));
  } finally {
    await caServer?.close();
    await stopProcess(backend);
  }
  const plain = rows[0]?.metrics.rps;
  for (const r of rows) if (plain && r.metrics.rps !== undefined) r.metrics.vsPlain = r.metrics.rps / plain;
  const res: ScenarioResult = {
    scenario: 'mtls', title: 'two skua sidecars, plaintext vs ISTIO_MUTUAL mTLS (wrk, keep-alive, 5-byte body)',
    startedAt, seconds: (performance.now() - t0) / 1000, primary: 'rps', columns: COLUMNS, rows,
    helperConfigs: { backend: backendConf },
    settings: {
      wrk: `-t${opts.threads} -c${opts.connections} -d${opts.duration}s --latency`, warmupSeconds: opts.warmup,
      path: 'wrk → client skua (plaintext listener) → server skua (inbound) → nginx', workers: 'each skua-proxy --concurrency 1',
      certificates: 'P-256 leaf from the local CA via CA_ADDR (istio-agent flow), TLS 1.3',
    },
  };
  const outcome = mtlsChecks([res])[0];
  if (outcome) res.settings.acceptance = `${outcome.status} ${outcome.name} (${outcome.detail})`;
  return res;
}

/** The scenario's acceptance line: mTLS with reuse >= 0.7x the plaintext pair. */
export function mtlsChecks(results: readonly ScenarioResult[]): CheckOutcome[] {
  const res = results.find((r) => r.scenario === 'mtls');
  if (!res) return [];
  const [plain, mtls] = res.rows;
  const fail = (detail: string, ratio?: number): CheckOutcome => ({ name: CHECK_NAME, status: 'FAIL', min: MIN_RATIO, ratio, detail });
  if (!plain || !mtls || plain.error || mtls.error) return [fail(`a case failed: ${(plain?.error ?? mtls?.error ?? 'did not run').split('\n')[0]}`)];
  const ratio = mtls.metrics.vsPlain;
  if (ratio === undefined) return [fail('no req/s')];
  const errs = res.rows.reduce((n, r) => n + (r.metrics.errors ?? 0), 0);
  const detail = `mTLS ${Math.round(mtls.metrics.rps)} req/s vs plaintext ${Math.round(plain.metrics.rps)}; ${Math.round(res.rows[2]?.metrics.handshakesPerSec ?? 0)} handshakes/s with a new connection per request`;
  if (errs > 0) return [fail(`${detail}, but ${errs} errors`, ratio)];
  return [{ name: CHECK_NAME, status: ratio >= MIN_RATIO ? 'PASS' : 'FAIL', ratio, min: MIN_RATIO, detail }];
}
