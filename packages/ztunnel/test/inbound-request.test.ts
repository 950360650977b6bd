// The inbound decision (ztunnel's build_inbound_request) as a table: :authority by pod IP or
// service hostname, port mapping, mismatched IPs (400) unless we are the target's waypoint or run
// an application tunnel, unknown services and our own ports (503), the facts authorization sees,
// the guessed destination service; ztunnel's status by case. And PROXY protocol v2 with the peer
// identity TLV, read back by haproxy (accept-proxy) as a real peer.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { once } from 'node:events';
import { decideIstio } from '../src/core.ts';
import { ProxyState } from '../src/state/store.ts';
import { loadLocalConfig } from '../src/state/updater.ts';
import { buildInboundRequest, InboundError, parseAuthority } from '../src/inbound/request.ts';
import { proxyV2Header, PEER_IDENTITY_TLV } from '../src/inbound/proxy-protocol.ts';
import { connectWhenUp } from './lib/wait.ts';

const MESH = `
workloads:
- {uid: s, name: server, namespace: default, serviceAccount: server, workloadIps: [10.0.0.2], protocol: HBONE,
   services: {"default/echo.default.svc.cluster.local": {80: 8080}}}
- {uid: c, name: client, namespace: other, serviceAccount: client, workloadIps: [10.0.0.1], protocol: HBONE}
- {uid: w, name: waypoint, namespace: default, serviceAccount: waypoint, workloadIps: [10.0.0.9], protocol: HBONE,
   applicationTunnel: {protocol: PROXY, port: 15088}, services: {"default/waypoint.default.svc.cluster.local": {15008: 15008}}}
- {uid: r, name: ratings, namespace: default, serviceAccount: ratings, workloadIps: [10.0.0.4], protocol: HBONE,
   waypoint: {destination: /10.96.0.9, hboneMtlsPort: 15008}}
services:
- {name: echo, namespace: default, hostname: echo.default.svc.cluster.local, vips: [/10.96.0.1], ports: {80: 8080}}
- {name: waypoint, namespace: default, hostname: waypoint.default.svc.cluster.local, vips: [/10.96.0.9], ports: {15008: 15008}}
policies:
- {name: allow-client, namespace: default, scope: Namespace, action: Allow,
   rules: [[[{principals: [{Exact: cluster.local/ns/other/sa/client}]}]]]}
`;
const state = new ProxyState();
loadLocalConfig(state, MESH);
const ctx = { state, network: '', illegalPorts: new Set([15001, 15006, 15008]) };
const CLIENT = 'spiffe://cluster.local/ns/other/sa/client';
const conn = (dst: string, identity: string | null = CLIENT) => ({ src: { address: '10.0.0.1', port: 40000 }, dst: { address: dst, port: 15008 }, srcIdentity: identity ?? undefined });

describe('inbound decision', () => {
  test('authorities', () => {
    assert.deepEqual(parseAuthority('10.0.0.2:8080'), { kind: 'ip', addr: { address: '10.0.0.2', port: 8080 } });
    assert.deepEqual(parseAuthority('[FD00::1]:80'), { kind: 'ip', addr: { address: 'fd00::1', port: 80 } });
    assert.deepEqual(parseAuthority('Echo.default.svc.cluster.local:80'), { kind: 'host', hostname: 'echo.default.svc.cluster.local', port: 80 });
    for (const bad of ['10.0.0.2', '10.0.0.2:99999', ':80', 'a b:80', '[host]:80', '']) assert.equal(parseAuthority(bad), undefined, bad);
  });

  test('by pod IP: the port as asked; facts with the peer; the service guessed from the target port', () => {
    const r = buildInboundRequest(ctx, state.workloadsByUid.get('s')!, conn('10.0.0.2'), '10.0.0.2:8080', undefined);
    assert.deepEqual(r.upstream, { address: '10.0.0.2', port: 8080 });
    assert.equal(r.tunnel, undefined);
    assert.equal(r.source?.uid, 'c');
    assert.equal(r.destinationService?.hostname, 'echo.default.svc.cluster.local');
    assert.deepEqual([r.facts.directRemoteIp, r.facts.destinationIp, r.facts.destinationPort, r.facts.peerUriSans], ['10.0.0.1', '10.0.0.2', 8080, [CLIENT]]);
    assert.equal(decideIstio(state.policiesFor(state.workloadsByUid.get('s')!), r.facts).allowed, true);
    const plain = buildInboundRequest(ctx, state.workloadsByUid.get('s')!, conn('10.0.0.2', null), '10.0.0.2:8080', undefined);
    assert.equal(decideIstio(state.policiesFor(state.workloadsByUid.get('s')!), plain.facts).reason, 'allow policies exist, but none allowed');
  });

  test('by service hostname: the service port maps to the target port; Forwarded host names the service', () => {
    const r = buildInboundRequest(ctx, state.workloadsByUid.get('s')!, conn('10.0.0.2'), 'echo.default.svc.cluster.local:80', 'for="10.0.0.1:40000";host=echo.default.svc.cluster.local');
    assert.deepEqual(r.upstream, { address: '10.0.0.2', port: 8080 });
    assert.equal(r.forHost, 'echo.default.svc.cluster.local');
    assert.equal(r.destinationService?.name, 'echo');
  });

  test('an application tunnel: PROXY to its port, announcing the HBONE target (a VIP for a hostname)', () => {
    const w = state.workloadsByUid.get('w')!;
    const byIp = buildInboundRequest(ctx, w, conn('10.0.0.9'), '10.0.0.4:9080', undefined);
    assert.deepEqual(byIp.upstream, { address: '10.0.0.9', port: 15088 });
    assert.deepEqual(byIp.tunnel, { protocol: 'PROXY', target: { address: '10.0.0.4', port: 9080 } });
  });

  test("a waypoint without a tunnel accepts its targets' IPs (waypoint sandwich)", () => {
    const s2 = new ProxyState();
    loadLocalConfig(s2, MESH.replace('applicationTunnel: {protocol: PROXY, port: 15088}, ', ''));
    const r = buildInboundRequest({ ...ctx, state: s2 }, s2.workloadsByUid.get('w')!, conn('10.0.0.9'), '10.0.0.4:9080', undefined);
    assert.deepEqual(r.upstream, { address: '10.0.0.9', port: 9080 });
  });

  const errors: Array<[string, string, string, number, RegExp]> = [
    ['another workload\'s IP', 's', '10.0.0.4:9080', 400, /ip mismatch: 10\.0\.0\.2 != 10\.0\.0\.4/],
    ['not an address', 's', 'nonsense', 400, /invalid CONNECT address nonsense/],
    ['an unknown service', 's', 'nope.default.svc.cluster.local:80', 503, /no service or workload for hostname/],
    ['a service port it does not have', 's', 'echo.default.svc.cluster.local:81', 503, /cannot resolve port/],
    ['our own ports', 's', '10.0.0.2:15006', 503, /attempted recursive call to ourselves/],
  ];
  for (const [name, uid, authority, status, message] of errors) {
    test(`${status}: ${name}`, () => {
      const w = state.workloadsByUid.get(uid)!;
      assert.throws(() => buildInboundRequest(ctx, w, conn(w.workloadIps[0]), authority, undefined), (e: unknown) => e instanceof InboundError && e.status === status && message.test(e.message));
    });
  }
});

describe('PROXY protocol v2', () => {
  test('the header: signature, PROXY/TCP4, addresses, the identity TLV', () => {
    const h = proxyV2Header({ address: '10.0.0.1', port: 40000 }, { address: '10.0.0.4', port: 9080 }, CLIENT);
    assert.equal(h.subarray(0, 12).toString('hex'), '0d0a0d0a000d0a515549540a');
    assert.deepEqual([h[12], h[13], h.readUInt16BE(14)], [0x21, 0x11, 12 + 3 + CLIENT.length]);
    assert.deepEqual([...h.subarray(16, 24)], [10, 0, 0, 1, 10, 0, 0, 4]);
    assert.deepEqual([h.readUInt16BE(24), h.readUInt16BE(26)], [40000, 9080]);
    assert.deepEqual([h[28], h.readUInt16BE(29), h.subarray(31).toString()], [PEER_IDENTITY_TLV, CLIENT.length, CLIENT]);
    const v6 = proxyV2Header({ address: 'fd00::1', port: 1 }, { address: '10.0.0.4', port: 2 }, undefined);
    assert.deepEqual([v6[13], v6.readUInt16BE(14), v6.subarray(16, 18).toString('hex'), v6.subarray(40, 48).toString('hex')], [0x21, 36, 'fd00', '0000ffff0a000004']);
  });

  test('haproxy (accept-proxy) reads the addresses and skips the TLV', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'skua-pp-'));
    const port = 21000 + (process.pid % 5000);
    writeFileSync(join(dir, 'h.cfg'), [
      'global', '  maxconn 100', 'defaults', '  mode http', '  timeout client 5s', '  timeout connect 5s', '  timeout server 5s',
      'frontend fe', `  bind 127.0.0.1:${port} accept-proxy`,
      '  http-request return status 200 content-type text/plain lf-string "%[src]:%[src_port] -> %[dst]:%[dst_port]"', '',
    ].join('\n'));
    const h = spawn('haproxy', ['-db', '-f', join(dir, 'h.cfg')], { stdio: 'ignore' });
    try {
      const s = await connectWhenUp(port);
      s.write(proxyV2Header({ address: '10.1.2.3', port: 40000 }, { address: '10.4.5.6', port: 9080 }, CLIENT));
      s.write('GET / HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n');
      const chunks: Buffer[] = [];
      s.on('data', (c: Buffer) => chunks.push(c));
      await once(s, 'end');
      assert.match(Buffer.concat(chunks).toString(), /\r\n\r\n10\.1\.2\.3:40000 -> 10\.4\.5\.6:9080$/);
      s.destroy();
    } finally {
      h.kill();
      await once(h, 'exit');
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
