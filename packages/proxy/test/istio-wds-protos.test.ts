// Skua's declarations of Istio's WDS (istio.workload.Address), L4 policy (istio.security.Authorization)
// and ZDS messages: they load through xds/protos.ts with the wire facts of Istio's API, and the real
// ztunnel config dump's workloads, services and policies (ztunnel's admin JSON, mapped here to
// proto-JSON) encode and decode back to the same values.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { isIPv4 } from 'node:net';
import { decodeResource } from '../src/xds/decode.ts';
import { encodeResource } from '../src/xds/encode.ts';
import { typeForUrl } from '../src/xds/protos.ts';

type Json = Record<string, unknown>;
const ADDRESS = 'type.googleapis.com/istio.workload.Address';
const AUTHZ = 'type.googleapis.com/istio.security.Authorization';
const DUMP = JSON.parse(readFileSync(new URL('../../../../shared/fixtures/istio-istio/istioctl/pkg/writer/ztunnel/configdump/testdata/dump.json', import.meta.url), 'utf8')) as {
  workloads: Record<string, Json>; services: Record<string, Json>; policies: Json[];
};

function ipB64(ip: string): string {
  assert.ok(isIPv4(ip), `IPv4 expected: ${ip}`);
  return Buffer.from(ip.split('.').map(Number)).toString('base64');
}

/** ztunnel prints addresses as `network/ip`. */
function networkAddress(text: string): Json {
  const slash = text.lastIndexOf('/');
  const network = text.slice(0, slash);
  return network ? { network, address: ipB64(text.slice(slash + 1)) } : { address: ipB64(text.slice(slash + 1)) };
}

const upper = (s: string): string => s.replace(/([a-z])([A-Z])/g, '$1_$2').toUpperCase();

function workloadJson(w: Json, services: Record<string, Json>): Json {
  const out: Json = {
    uid: w.uid, name: w.name, namespace: w.namespace, addresses: (w.workloadIps as string[]).map(ipB64),
    trust_domain: w.trustDomain, service_account: w.serviceAccount, node: w.node, canonical_name: w.canonicalName,
    canonical_revision: w.canonicalRevision, workload_name: w.workloadName, cluster_id: w.clusterId,
  };
  if (w.network) out.network = w.network;
  if (w.protocol === 'HBONE') out.tunnel_protocol = 'HBONE';
  if (w.workloadType !== 'deployment') out.workload_type = upper(String(w.workloadType));
  if (w.nativeTunnel) out.native_tunnel = true;
  if (w.status !== 'Healthy') out.status = upper(String(w.status));
  const wp = w.waypoint as { destination: string; port: number } | undefined;
  if (wp) out.waypoint = { address: networkAddress(wp.destination), hbone_mtls_port: wp.port };
  // The dump lists each service's endpoints; the proto carries them on the workload instead.
  const svcs: Json = {};
  for (const s of Object.values(services)) {
    for (const ep of Object.values(s.endpoints as Record<string, Json>)) {
      if (ep.workloadUid !== w.uid) continue;
      svcs[String(ep.service)] = { ports: Object.entries(ep.port as Record<string, number>).map(([sp, tp]) => ({ service_port: Number(sp), target_port: tp })) };
    }
  }
  if (Object.keys(svcs).length) out.services = svcs;
  return out;
}

function serviceJson(s: Json): Json {
  const out: Json = {
    name: s.name, namespace: s.namespace, hostname: s.hostname,
    addresses: (s.vips as string[]).map(networkAddress),
    ports: Object.entries(s.ports as Record<string, number>).map(([sp, tp]) => ({ service_port: Number(sp), target_port: tp })),
  };
  if ((s.subjectAltNames as string[]).length) out.subject_alt_names = s.subjectAltNames;
  return out;
}

function policyJson(p: Json): Json {
  const out: Json = { name: p.name, namespace: p.namespace, scope: upper(String(p.scope)) };
  if (p.action !== 'Allow') out.action = upper(String(p.action));
  const rules = (p.rules as Json[][][]).map((clauses) => ({
    clauses: clauses.map((matches) => ({ matches: matches.map((m) => ({ service_accounts: m.serviceAccounts })) })),
  }));
  if (rules.length) out.rules = rules;
  return out;
}

function roundTrip(json: Json): Json {
  const any = encodeResource(json);
  const back = decodeResource(any);
  // Bytes are stable through a second pass too.
  assert.deepEqual(Buffer.from(encodeResource(back).value), Buffer.from(any.value));
  return back;
}

describe('Istio WDS/ZDS protos', () => {
  test('field numbers and types are the wire facts of Istio API', () => {
    const fields = (name: string): string => typeForUrl(`type.googleapis.com/${name}`)!.fieldsArray.map((f) => `${f.name}=${f.id}:${f.type}`).sort().join(' ');
    assert.equal(fields('istio.workload.Address'), 'service=2:Service workload=1:Workload');
    const workload = fields('istio.workload.Workload');
    for (const f of ['uid=20:string', 'services=22:PortList', 'capacity=27:google.protobuf.UInt32Value', 'application_tunnel=23:ApplicationTunnel', 'addresses=3:bytes', 'tunnel_protocol=5:TunnelProtocol', 'network_gateway=19:GatewayAddress']) {
      assert.ok(workload.split(' ').includes(f), f);
    }
    assert.equal(fields('istio.workload.GatewayAddress'), 'address=2:NetworkAddress hbone_mtls_port=3:uint32 hostname=1:NamespacedHostname');
    assert.equal(fields('istio.security.Clause'), 'matches=2:Match');
    assert.ok(fields('istio.security.Match').includes('service_accounts=11:ServiceAccountMatch'));
    assert.ok(fields('istio.security.Match').includes('not_destination_ports=10:uint32'));
    assert.equal(fields('istio.security.ServiceAccountMatch'), 'namespace=1:string serviceAccount=2:string');
    assert.equal(fields('istio.workload.zds.DelWorkload'), 'uid=2:string');
    assert.equal(fields('istio.workload.zds.WorkloadRequest'), 'add=1:AddWorkload del=2:DelWorkload keep=5:KeepWorkload snapshot_sent=3:SnapshotSent');
  });

  test('every workload of the ztunnel dump round-trips as an Address', () => {
    assert.equal(Object.keys(DUMP.workloads).length, 27);
    for (const [key, w] of Object.entries(DUMP.workloads)) {
      const json = { '@type': ADDRESS, workload: workloadJson(w, DUMP.services) };
      assert.deepEqual(roundTrip(json), json, key);
    }
    // The waypoint'd, multi-network ratings pod, checked field by field after decoding.
    const ratings = roundTrip({ '@type': ADDRESS, workload: workloadJson(DUMP.workloads['network1/10.244.2.54'], DUMP.services) }).workload as Json;
    assert.equal(ratings.tunnel_protocol, 'HBONE');
    assert.deepEqual(ratings.waypoint, { address: { address: Buffer.from([10, 96, 65, 117]).toString('base64') }, hbone_mtls_port: 15008 });
    assert.equal(ratings.network, 'network1');
    assert.deepEqual(Object.keys(ratings.services as Json), ['bookinfo/ratings.bookinfo.svc.cluster.local']);
  });

  test('every service of the ztunnel dump round-trips as an Address', () => {
    for (const [key, s] of Object.entries(DUMP.services)) {
      const json = { '@type': ADDRESS, service: serviceJson(s) };
      assert.deepEqual(roundTrip(json), json, key);
    }
  });

  test('the dump policies round-trip as Authorizations (enum names, nested rules)', () => {
    const out = DUMP.policies.map((p) => roundTrip({ '@type': AUTHZ, ...policyJson(p) }));
    assert.deepEqual(out[0], { '@type': AUTHZ, name: 'allow-nothing', namespace: 'default', scope: 'NAMESPACE' });
    assert.deepEqual(out[1], {
      '@type': AUTHZ, name: 'allow-waypoint', namespace: 'default', scope: 'WORKLOAD_SELECTOR',
      rules: [{ clauses: [{ matches: [{ service_accounts: [{ namespace: 'default', serviceAccount: 'waypoint' }] }] }] }],
    });
  });

  test('string matches, CIDRs, ports and DENY survive; a proto3 optional zero length is kept', () => {
    const json = {
      '@type': AUTHZ, name: 'p', namespace: 'ns', scope: 'GLOBAL', action: 'DENY', dry_run: true,
      rules: [{ clauses: [{ matches: [{
        principals: [{ exact: 'a' }, { prefix: 'b' }, { suffix: 'c' }, { presence: {} }],
        not_namespaces: [{ exact: 'x' }],
        source_ips: [{ address: ipB64('10.1.0.0'), length: 16 }],
        destination_ports: [80, 443], not_destination_ports: [9999],
      }] }] }],
    };
    // GLOBAL is the default scope: not printed.
    const { scope: _s, ...expected } = json;
    assert.deepEqual(roundTrip(json), expected);
    const svc = { '@type': ADDRESS, service: { name: 's', addresses: [{ address: ipB64('0.0.0.0'), length: 0 }] } };
    assert.deepEqual(roundTrip(svc), svc);
  });

  test('ZDS messages encode and decode', () => {
    const t = typeForUrl('type.googleapis.com/istio.workload.zds.WorkloadRequest')!;
    const add = t.decode(t.encode(t.fromObject({ add: { uid: 'pod-uid', workload_info: { name: 'p', namespace: 'n', service_account: 'sa' } } })).finish()) as unknown as Json;
    assert.deepEqual(JSON.parse(JSON.stringify(add)), { add: { uid: 'pod-uid', workload_info: { name: 'p', namespace: 'n', service_account: 'sa' } } });
    const del = t.encode(t.fromObject({ del: { uid: 'u' } })).finish();
    // Field 2 (del), length 3, inner field 2 (uid) length 1: the wire bytes Istio's CNI agent sends.
    assert.deepEqual([...del], [0x12, 3, 0x12, 1, 0x75]);
  });
});
