// The admin's config_dump against the real ztunnel dump istioctl's tests read (dump.json): the
// fixture's workloads, services and policies, loaded as ztunnel state, print back exactly as the
// fixture has them; the in-pod workload state has the fixture's shape. The admin's /connections,
// fed the connections of istioctl's connectionsdump.json, serves that file's JSON key for key. Metrics carry ztunnel's
// names and labels; the access log line has ztunnel's fields; the admin, stats and readiness
// servers answer over HTTP.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { stringify } from 'yaml';
import { ProxyState } from '../src/state/store.ts';
import { loadLocalConfig } from '../src/state/updater.ts';
import { ConnectionManager } from '../src/connections.ts';
import { configDump, connectionsDump, type LocalWorkloadState } from '../src/admin/config-dump.ts';
import { startAdminServers, type StartedServers } from '../src/admin/servers.ts';
import { ConnectionResult } from '../src/telemetry/connection-result.ts';
import { ZtunnelMetrics } from '../src/telemetry/metrics.ts';

type Json = Record<string, unknown>;
const TESTDATA = new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/writer/ztunnel/configdump/testdata/', import.meta.url);
const DUMP = JSON.parse(readFileSync(new URL('dump.json', TESTDATA), 'utf8')) as {
  workloads: Record<string, Json>; services: Record<string, Json>; policies: Json[]; workloadState: Record<string, Json>;
};
interface DumpedConnection { src: string; originalDst: string; actualDst: string; protocol: 'HBONE' | 'TCP' }
const CONNECTIONS = JSON.parse(readFileSync(new URL('connectionsdump.json', TESTDATA), 'utf8')) as Array<{
  state: string; connections: { inbound: DumpedConnection[]; outbound: DumpedConnection[] }; info: { name: string; namespace: string; serviceAccount: string };
}>;

/** The dump as a LOCAL_XDS file: services' endpoints move onto their workloads (as WDS carries them). */
function localFromDump(): string {
  const workloads: Array<Json & { services: Record<string, unknown> }> = Object.values(DUMP.workloads).map((w) => ({ ...w, services: {} }));
  for (const s of Object.values(DUMP.services)) {
    for (const ep of Object.values(s.endpoints as Record<string, Json>)) {
      const w = workloads.find((x) => x.uid === ep.workloadUid);
      if (w) w.services[String(ep.service)] = ep.port as Record<string, number>;
    }
  }
  const services = Object.values(DUMP.services).map((s) => { const { endpoints: _e, ...rest } = s; return rest; });
  return stringify({ workloads, services, policies: DUMP.policies });
}

describe('config_dump', () => {
  const state = new ProxyState();
  loadLocalConfig(state, localFromDump());
  const connections = new ConnectionManager(state);

  test("the fixture's workloads, services and policies print back as the fixture has them", () => {
    const dump = configDump(state, connections, [], []) as { workloads: Json; services: Json; policies: Json[] };
    assert.deepEqual(Object.keys(dump).sort(), Object.keys(DUMP).sort());
    assert.deepEqual(dump.workloads, DUMP.workloads);
    assert.deepEqual(dump.services, DUMP.services);
    assert.deepEqual(dump.policies, DUMP.policies);
  });

  test("the in-pod workload state has the fixture's shape", () => {
    const w = state.workloadByAddress('', '10.244.2.58')!;
    const untrack = connections.track({ direction: 'inbound', proxyUid: w.uid, localUid: w.uid, src: '10.244.2.55:35078', originalDst: null, actualDst: '10.244.2.58:80', protocol: 'HBONE', close: () => {} });
    connections.track({ direction: 'outbound', proxyUid: w.uid, localUid: w.uid, src: '10.244.2.58:35380', originalDst: '10.96.115.16:443', actualDst: '10.244.2.8:8443', protocol: 'TCP', close: () => {} });
    const dump = configDump(state, connections, [], [{ uid: w.uid, name: w.name, namespace: w.namespace, serviceAccount: w.serviceAccount, state: 'Up' }]) as { workloadState: Record<string, Json> };
    const ours = dump.workloadState[w.uid];
    const theirs = Object.values(DUMP.workloadState)[0];
    const shape = (x: unknown): unknown => (Array.isArray(x) ? x.slice(0, 1).map(shape) : x && typeof x === 'object' ? Object.fromEntries(Object.entries(x).map(([k, v]) => [k, shape(v)]).sort()) : typeof x);
    assert.deepEqual(shape({ ...ours, connections: { inbound: (ours.connections as Json).inbound, outbound: [] } }), shape({ ...theirs, connections: { inbound: (theirs.connections as Json).inbound, outbound: [] } }));
    assert.deepEqual((ours.connections as { outbound: Json[] }).outbound, [{ src: '10.244.2.58:35380', originalDst: '10.96.115.16:443', actualDst: '10.244.2.8:8443', protocol: 'TCP' }]);
    untrack();
    assert.equal(connections.connectionsOf(w.uid).inbound.length, 0);
  });
});

describe('connections dump', () => {
  let servers: StartedServers | undefined;
  after(async () => { await servers?.close(); });

  test("/connections serves istioctl's connectionsdump.json key for key (order, '' for no original destination)", async () => {
    const connections = new ConnectionManager(new ProxyState());
    const locals: LocalWorkloadState[] = CONNECTIONS.map((w) => ({ uid: `uid-${w.info.name}`, name: w.info.name, namespace: w.info.namespace, serviceAccount: w.info.serviceAccount, state: w.state }));
    for (const [i, w] of CONNECTIONS.entries()) {
      for (const direction of ['inbound', 'outbound'] as const) {
        for (const c of w.connections[direction]) {
          connections.track({ direction, proxyUid: locals[i].uid, localUid: locals[i].uid, src: c.src, originalDst: c.originalDst === '' ? null : c.originalDst, actualDst: c.actualDst, protocol: c.protocol, close: () => {} });
        }
      }
    }
    // Pods arrive in any order; the dump sorts by namespace, then name.
    const shuffled = [...locals].reverse();
    servers = await startAdminServers({ configDump: () => ({}), connections: () => connectionsDump(connections, shuffled), metrics: () => '', pending: () => [], quit: () => {} },
      { admin: 0, stats: 0, readiness: 0 }, '127.0.0.1');
    const r = await fetch(`http://127.0.0.1:${servers.ports.admin}/connections`);
    assert.equal(r.headers.get('content-type'), 'application/json');
    const served = await r.json() as unknown;
    assert.deepEqual(served, CONNECTIONS);
    assert.equal(JSON.stringify(served), JSON.stringify(CONNECTIONS), 'the same keys in the same order');
  });
});

describe('metrics and access log', () => {
  const state = new ProxyState();
  loadLocalConfig(state, localFromDump());
  const src = state.workloadByAddress('', '10.244.2.58')!;
  const dst = state.workloadByAddress('', '10.244.2.55')!;

  test('one record per connection: opened/closed counters, bytes, failures with a flag, one log line', () => {
    const metrics = new ZtunnelMetrics();
    const lines: string[] = [];
    const r = new ConnectionResult(metrics, (l) => lines.push(l), {
      reporter: 'source', source: src, derivedSource: { identity: src.identity }, destination: dst,
      destinationService: { hostname: 'details.default.svc.cluster.local', name: 'details', namespace: 'default' }, mtls: true,
      srcAddr: '10.244.2.58:40000', dstAddr: '10.244.2.55:15008', hboneTarget: '10.244.2.55:9080',
    });
    assert.match(metrics.render(), /istio_tcp_sockets_open\{reporter="source"\} 1/);
    r.bytesIn = 84; r.bytesOut = 250;
    r.record(undefined);
    r.record('twice'); // a second record is ignored
    const text = metrics.render();
    const labels = 'reporter="source",source_workload="sleep",source_canonical_service="sleep",source_canonical_revision="latest",source_workload_namespace="default",'
      + 'source_principal="spiffe://cluster.local/ns/default/sa/sleep",source_app="sleep",source_version="latest",source_cluster="Kubernetes",'
      + 'destination_service="details.default.svc.cluster.local",destination_service_namespace="default",destination_service_name="details",'
      + 'destination_workload="details-v1",destination_canonical_service="details",destination_canonical_revision="v1",destination_workload_namespace="default",'
      + 'destination_principal="spiffe://cluster.local/ns/default/sa/bookinfo-details",destination_app="details",destination_version="v1",destination_cluster="Kubernetes",'
      + 'request_protocol="tcp",response_flags="-",connection_security_policy="mutual_tls",source_region="unknown",source_zone="unknown",destination_region="unknown",destination_zone="unknown"';
    for (const line of [`istio_tcp_connections_opened_total{${labels}} 1`, `istio_tcp_connections_closed_total{${labels}} 1`,
      `istio_tcp_received_bytes_total{${labels}} 84`, `istio_tcp_sent_bytes_total{${labels}} 250`, 'istio_tcp_sockets_open{reporter="source"} 0']) {
      assert.ok(text.includes(line), `missing ${line}\n${text}`);
    }
    assert.equal(lines.length, 1);
    assert.match(lines[0], /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z\tinfo\taccess\tconnection complete\tsrc\.addr=10\.244\.2\.58:40000 src\.workload="sleep-7656cf8794-lxcmx" src\.namespace="default" src\.identity="spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep" dst\.addr=10\.244\.2\.55:15008 dst\.hbone_addr=10\.244\.2\.55:9080 dst\.service="details\.default\.svc\.cluster\.local" dst\.workload="details-v1-698d88b-krdw7" dst\.namespace="default" dst\.identity="spiffe:\/\/cluster\.local\/ns\/default\/sa\/bookinfo-details" direction="outbound" bytes_sent=84 bytes_recv=250 duration="\d+ms"$/);

    const denied = new ConnectionResult(metrics, (l) => lines.push(l), {
      reporter: 'destination', source: undefined, derivedSource: undefined, destination: dst, destinationService: undefined, mtls: false,
      srcAddr: '10.0.0.9:5000', dstAddr: '10.244.2.55:9080', hboneTarget: undefined,
    });
    denied.record('explicitly denied by: default/deny', 'DENY');
    assert.match(metrics.render(), /istio_tcp_connections_failed_total\{reporter="destination",source_workload="unknown",[^}]*response_flags="DENY",connection_security_policy="unknown"[^}]*\} 1/);
    assert.match(lines[1], /\terror\taccess\tconnection complete\tsrc\.addr=10\.0\.0\.9:5000 dst\.addr=10\.244\.2\.55:9080 dst\.workload="details-v1-698d88b-krdw7" dst\.namespace="default" direction="inbound" bytes_sent=0 bytes_recv=0 duration="\d+ms" error="explicitly denied by: default\/deny"$/);
    assert.doesNotMatch(lines[1], /identity/);
  });
});

describe('admin, stats and readiness servers', () => {
  let servers: StartedServers;
  let pending = ['workload cert', 'wds'];
  let quits = 0;
  after(async () => { await servers?.close(); });

  test('config_dump, metrics, readiness, quitquitquit', async () => {
    servers = await startAdminServers({
      configDump: () => ({ workloads: {} }), connections: () => [], metrics: () => 'istio_build{component="ztunnel"} 1\n',
      pending: () => pending, quit: () => { quits++; },
    }, { admin: 0, stats: 0, readiness: 0 }, '127.0.0.1');
    const get = async (port: number, path: string, method = 'GET') => {
      const r = await fetch(`http://127.0.0.1:${port}${path}`, { method });
      return { status: r.status, body: await r.text(), type: r.headers.get('content-type') };
    };
    assert.deepEqual(JSON.parse((await get(servers.ports.admin, '/config_dump')).body), { workloads: {} });
    const m = await get(servers.ports.stats, '/stats/prometheus');
    assert.equal(m.body, 'istio_build{component="ztunnel"} 1\n');
    assert.equal((await get(servers.ports.stats, '/metrics')).status, 200);
    assert.deepEqual(await get(servers.ports.readiness, '/healthz/ready'), { status: 500, body: 'not ready, pending: wds, workload cert\n', type: 'text/plain' });
    pending = [];
    assert.equal((await get(servers.ports.readiness, '/healthz/ready')).body, 'ready\n');
    assert.equal((await get(servers.ports.admin, '/quitquitquit')).status, 405);
    assert.equal((await get(servers.ports.admin, '/quitquitquit', 'POST')).status, 200);
    assert.equal(quits, 1);
    assert.equal((await get(servers.ports.admin, '/logging?level=debug', 'POST')).body, 'current log level is debug\n');
    assert.equal((await get(servers.ports.admin, '/logging?level=nonsense', 'POST')).status, 400);
    assert.equal((await get(servers.ports.admin, '/logging?reset', 'POST')).body, 'current log level is info\n');
  });
});
