// The control plane's ADS stream state machines, driven with real encoded DiscoveryRequests:
// what is sent on subscribe, on change, on ACK/NACK, on stale nonces, and on resume.
import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import {
  decodeDeltaResponse, decodeSotwResponse, encodeDeltaRequest, encodeSotwRequest, TYPE_URL,
} from '@skua/proxy/xds';
import { Snapshot } from '../src/ads/snapshot.ts';
import { SotwStream } from '../src/ads/sotw-stream.ts';
import { DeltaStream } from '../src/ads/delta-stream.ts';
import { groupOf } from '../src/files.ts';
import type { StreamEvents } from '../src/ads/events.ts';

const NODE = { id: 'sidecar~10.0.0.1~a.ns~ns.svc.cluster.local' };
const cluster = (name: string, timeout = '1s') => ({ '@type': TYPE_URL.cluster, name, type: 'STATIC', connect_timeout: timeout });
const cla = (name: string, port: number) => ({ '@type': TYPE_URL.endpoint, cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '10.1.1.1', port_value: port } } } }] }] });

function harness<S extends SotwStream | DeltaStream>(make: (snap: Snapshot, send: (b: Buffer) => void, ev: StreamEvents) => S) {
  const snap = new Snapshot();
  const sent: Buffer[] = [];
  const nacks: string[] = [];
  const ev: StreamEvents = { connected: () => {}, ack: () => {}, nack: (_n, _t, _v, m) => { nacks.push(m); }, sent: () => {} };
  const stream = make(snap, (b) => sent.push(b), ev);
  snap.onChange(() => stream.onSnapshot());
  return { snap, sent, nacks, stream };
}

describe('SotW stream', () => {
  test('wildcard CDS: full state on subscribe, again on change, nothing on ACK or a stale nonce', () => {
    const h = harness((s, send, ev) => new SotwStream(s, send, ev));
    h.snap.set([groupOf('f', [cluster('a'), cluster('b')])]);
    h.stream.onRequest(encodeSotwRequest({ version_info: '', node: NODE, resource_names: [], type_url: TYPE_URL.cluster, response_nonce: '' }));
    assert.equal(h.sent.length, 1);
    const r1 = decodeSotwResponse(h.sent[0]);
    assert.equal(r1.resources.length, 2);
    h.stream.onRequest(encodeSotwRequest({ version_info: r1.version_info, resource_names: [], type_url: TYPE_URL.cluster, response_nonce: r1.nonce }));
    assert.equal(h.sent.length, 1, 'an ACK gets no response');
    h.snap.set([groupOf('f', [cluster('a', '2s'), cluster('b')])]);
    assert.equal(h.sent.length, 2);
    const r2 = decodeSotwResponse(h.sent[1]);
    assert.notEqual(r2.version_info, r1.version_info);
    h.stream.onRequest(encodeSotwRequest({ version_info: r1.version_info, resource_names: [], type_url: TYPE_URL.cluster, response_nonce: r1.nonce }));
    assert.equal(h.sent.length, 2, 'a request with a stale nonce is ignored');
    h.snap.set([groupOf('f', [cluster('a', '2s'), cluster('b')])]);
    assert.equal(h.sent.length, 2, 'an unchanged snapshot sends nothing');
  });

  test('a NACK is recorded and the same version is not re-sent; named EDS gets only what was asked', () => {
    const h = harness((s, send, ev) => new SotwStream(s, send, ev));
    h.snap.set([groupOf('f', [cla('a', 1), cla('b', 2)])]);
    h.stream.onRequest(encodeSotwRequest({ version_info: '', node: NODE, resource_names: ['b'], type_url: TYPE_URL.endpoint, response_nonce: '' }));
    const r = decodeSotwResponse(h.sent[0]);
    assert.equal(r.resources.length, 1);
    h.stream.onRequest(encodeSotwRequest({ version_info: '', resource_names: ['b'], type_url: TYPE_URL.endpoint, response_nonce: r.nonce, error_detail: { code: 3, message: 'b: bad' } }));
    assert.deepEqual(h.nacks, ['b: bad']);
    assert.equal(h.sent.length, 1);
  });

  test('EDS (not LDS/CDS): a change sends only the changed assignments, as istiod\'s incremental EDS; a new subscription gets all', () => {
    const h = harness((s, send, ev) => new SotwStream(s, send, ev));
    h.snap.set([groupOf('f', [cla('a', 1), cla('b', 2), cla('c', 3)])]);
    h.stream.onRequest(encodeSotwRequest({ version_info: '', node: NODE, resource_names: ['a', 'b'], type_url: TYPE_URL.endpoint, response_nonce: '' }));
    const r1 = decodeSotwResponse(h.sent[0]);
    assert.equal(r1.resources.length, 2);
    h.stream.onRequest(encodeSotwRequest({ version_info: r1.version_info, resource_names: ['a', 'b'], type_url: TYPE_URL.endpoint, response_nonce: r1.nonce }));
    h.snap.set([groupOf('f', [cla('a', 10), cla('b', 2), cla('c', 30)])]);
    assert.equal(h.sent.length, 2, 'c is not subscribed; a changed');
    const r2 = decodeSotwResponse(h.sent[1]);
    assert.deepEqual(r2.resources.map((x) => x.value.length > 0), [true]);
    assert.match(Buffer.from(r2.resources[0].value).toString('latin1'), /\ba\b/, 'the one resource sent is a');
    assert.notEqual(r2.version_info, r1.version_info);
    h.stream.onRequest(encodeSotwRequest({ version_info: r2.version_info, resource_names: ['a', 'b'], type_url: TYPE_URL.endpoint, response_nonce: r2.nonce }));
    h.snap.set([groupOf('f', [cla('a', 10)])]);
    assert.equal(h.sent.length, 2, 'b left the set: nothing to send (the client keeps what it has, as from a whole set)');
    h.snap.set([groupOf('f', [cla('a', 10), cla('b', 2)])]);
    assert.equal(h.sent.length, 3, 'b came back: sent again');
    assert.equal(decodeSotwResponse(h.sent[2]).resources.length, 1);
    h.stream.onRequest(encodeSotwRequest({ version_info: decodeSotwResponse(h.sent[2]).version_info, resource_names: ['a', 'b', 'c'], type_url: TYPE_URL.endpoint, response_nonce: decodeSotwResponse(h.sent[2]).nonce }));
    assert.equal(decodeSotwResponse(h.sent[3]).resources.length, 2, 'a changed subscription gets every name it asks for that exists');
  });

  test('CDS stays the whole state on every change', () => {
    const h = harness((s, send, ev) => new SotwStream(s, send, ev));
    h.snap.set([groupOf('f', [cluster('a'), cluster('b')])]);
    h.stream.onRequest(encodeSotwRequest({ version_info: '', node: NODE, resource_names: [], type_url: TYPE_URL.cluster, response_nonce: '' }));
    h.snap.set([groupOf('f', [cluster('a', '5s'), cluster('b')])]);
    assert.equal(decodeSotwResponse(h.sent[1]).resources.length, 2);
  });

  test('a resuming client that already has the current version gets nothing', () => {
    const h = harness((s, send, ev) => new SotwStream(s, send, ev));
    h.snap.set([groupOf('f', [cluster('a')])]);
    h.stream.onRequest(encodeSotwRequest({ version_info: '', node: NODE, resource_names: [], type_url: TYPE_URL.cluster, response_nonce: '' }));
    const v = decodeSotwResponse(h.sent[0]).version_info;
    const again = harness((s, send, ev) => new SotwStream(s, send, ev));
    again.snap.set([groupOf('f', [cluster('a')])]);
    again.stream.onRequest(encodeSotwRequest({ version_info: v, node: NODE, resource_names: [], type_url: TYPE_URL.cluster, response_nonce: '' }));
    assert.equal(again.sent.length, 0);
  });
});

describe('Delta stream', () => {
  test('initial versions skip what the client has; changes send only the changed resource; removals are named', () => {
    const h = harness((s, send, ev) => new DeltaStream(s, send, ev));
    const g = groupOf('f', [cluster('a'), cluster('b')]);
    h.snap.set([g]);
    const va = g.byType.get(TYPE_URL.cluster)!.get('a')!.version;
    h.stream.onRequest(encodeDeltaRequest({ node: NODE, type_url: TYPE_URL.cluster, resource_names_subscribe: [], resource_names_unsubscribe: [], initial_resource_versions: { a: va, gone: 'x' }, response_nonce: '' }));
    const r1 = decodeDeltaResponse(h.sent[0]);
    assert.deepEqual(r1.resources.map((x) => x.name), ['b']);
    assert.deepEqual(r1.removed_resources, ['gone']);
    h.snap.set([groupOf('f', [cluster('a', '3s'), cluster('b')])]);
    const r2 = decodeDeltaResponse(h.sent[1]);
    assert.deepEqual(r2.resources.map((x) => x.name), ['a']);
    h.snap.set([groupOf('f', [cluster('a', '3s')])]);
    const r3 = decodeDeltaResponse(h.sent[2]);
    assert.deepEqual([r3.resources.length, r3.removed_resources], [0, ['b']]);
  });

  test('named subscriptions: subscribe sends, unsubscribe forgets, an empty wildcard first answer still goes out', () => {
    const h = harness((s, send, ev) => new DeltaStream(s, send, ev));
    h.snap.set([groupOf('f', [cla('a', 1), cla('b', 2)])]);
    h.stream.onRequest(encodeDeltaRequest({ node: NODE, type_url: TYPE_URL.endpoint, resource_names_subscribe: ['a'], resource_names_unsubscribe: [], initial_resource_versions: {}, response_nonce: '' }));
    assert.deepEqual(decodeDeltaResponse(h.sent[0]).resources.map((x) => x.name), ['a']);
    h.stream.onRequest(encodeDeltaRequest({ type_url: TYPE_URL.endpoint, resource_names_subscribe: ['b'], resource_names_unsubscribe: ['a'], initial_resource_versions: {}, response_nonce: '' }));
    assert.deepEqual(decodeDeltaResponse(h.sent[1]).resources.map((x) => x.name), ['b']);
    h.stream.onRequest(encodeDeltaRequest({ type_url: TYPE_URL.listener, resource_names_subscribe: [], resource_names_unsubscribe: [], initial_resource_versions: {}, response_nonce: '' }));
    const r = decodeDeltaResponse(h.sent[2]);
    assert.deepEqual([r.type_url, r.resources.length], [TYPE_URL.listener, 0]);
  });
});
