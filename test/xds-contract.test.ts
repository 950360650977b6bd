// The xDS contract under bad and hostile updates, driven over gRPC from a test ADS server (SotW and
// Delta) into a real skua-proxy, with traffic before and after each update, the NACK's error_detail
// and config_dump's error_state checked. Envoy's rules: a response with an Any that does not decode
// (or has another type URL) changes nothing; a resource refused by name keeps its last good
// version; only subscribed names apply (secrets the agent owns stay); duplicates are refused;
// bytes that are not a response reset the stream.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { connect as tlsConnect } from 'node:tls';
import { startTestAds, type AdsStream, type TestAds } from './lib/ads-server.ts';
import { adsBootstrap } from './lib/controlplane.ts';
import { cleanup, freePort, startProxy, type Json, type RunningProxy } from './lib/proxy.ts';
import { makeCert, startHttpBackend, type Backend, type TestCert } from './lib/backends.ts';
import { request } from './lib/client.ts';
import { T } from './lib/config.ts';
import {
  TYPE_URL, UNDECODABLE_CLUSTER, activeCluster, any, cla, dumpEntries, dynamicListener, edsCluster, errorDetails,
  httpListener, listenerWithUnknownFilter, listeningSockets, servedBy, staticCluster,
} from './lib/xds-resources.ts';

const SDS_GRPC = { api_config_source: { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'sds-grpc' } }] }, resource_api_version: 'V3' };
const SDS_ADS = { ads: {}, resource_api_version: 'V3' };

function tlsSocket(secret: string, source: Json): Json {
  return { name: 'envoy.transport_sockets.tls', typed_config: { '@type': T.downstreamTls, common_tls_context: { tls_certificate_sds_secret_configs: [{ name: secret, sds_config: source }] } } };
}

function secret(name: string, c: TestCert): Json {
  return { '@type': TYPE_URL.secret, name, tls_certificate: { certificate_chain: { inline_string: c.cert }, private_key: { inline_string: c.key } } };
}

/** The CN of the certificate a TLS listener presents. */
function servedCn(port: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const s = tlsConnect({ host: '127.0.0.1', port, rejectUnauthorized: false }, () => { resolve(String(s.getPeerCertificate().subject?.CN)); s.destroy(); });
    s.setTimeout(3000, () => s.destroy(new Error('TLS handshake timed out')));
    s.on('error', reject);
  });
}

// Two workers as well (SotW): they apply each update as the main thread applied it.
for (const [delta, workers] of [[false, 1], [true, 1], [false, 2]] as const) {
  const mode = `${delta ? 'Delta' : 'SotW'}, --concurrency ${workers}`;
  describe(`xDS contract (${mode}): a refused update changes nothing, only subscribed names apply`, () => {
    let ads: TestAds, proxy: RunningProxy, stream: AdsStream, a: Backend, b: Backend;
    let identity: TestCert, attacker: TestCert, serverCert: TestCert, certDir: string;
    let port: number, tlsPort: number, adsTlsPort: number;
    const clusters = (): Json[] => [staticCluster('backend', a.port), edsCluster('eds-backend')];
    const listeners = (): Json[] => [
      httpListener('http', port),
      httpListener('tls', tlsPort, { transportSocket: tlsSocket('default', SDS_GRPC) }),
      httpListener('ads-tls', adsTlsPort, { transportSocket: tlsSocket('server-cert', SDS_ADS) }),
    ];

    /** Sends resources the way this protocol sends them and returns the client's reply. */
    const send = async (typeUrl: string, jsons: readonly Json[], opts: { removed?: string[] } = {}): Promise<{ error: string | undefined; nonce: string }> => {
      const nonce = delta
        ? stream.sendDelta({ type_url: typeUrl, resources: jsons.map((j) => ({ name: String(j.name ?? j.cluster_name), version: 'x', resource: any(j) })), removed_resources: opts.removed })
        : stream.sendSotw({ type_url: typeUrl, resources: jsons.map(any) });
      const reply = await stream.reply(nonce);
      return { error: reply.error_detail?.message, nonce };
    };
    /** Every test starts from the good config, ACKed (a test that fails leaves no trace for the next). */
    const baseline = async (): Promise<void> => {
      for (const [typeUrl, jsons] of [[TYPE_URL.cluster, clusters()], [TYPE_URL.endpoint, [cla('eds-backend', [b.port])]], [TYPE_URL.listener, listeners()]] as const) {
        assert.equal((await send(typeUrl, jsons)).error, undefined, `baseline ${typeUrl}`);
      }
    };
    /** Requests on fresh connections (with two workers, enough to reach both) all reach the backend. */
    const assertServes = async (what: string): Promise<void> => {
      const n = a.requests.length;
      const count = workers === 1 ? 1 : 16;
      for (let i = 0; i < count; i++) {
        const r = await request(`http://127.0.0.1:${port}/${what}`);
        assert.equal(r.status, 200, `${what}: ${r.status} ${r.text}`);
        assert.equal(r.headers['x-listener'], 'http');
      }
      assert.equal(a.requests.length, n + count, `${what}: every request reached the backend`);
      // SO_REUSEPORT hands a closed socket's share to the others: count the sockets too.
      if (workers > 1) assert.equal(await listeningSockets(port), workers, `${what}: every worker listening`);
    };

    before(async () => {
      [a, b] = await Promise.all([startHttpBackend('a'), startHttpBackend('b')]);
      [identity, attacker, serverCert] = await Promise.all([makeCert('workload.example'), makeCert('attacker.example'), makeCert('server.example')]);
      certDir = mkdtempSync(path.join(tmpdir(), 'skua-xds-contract-'));
      mkdirSync(path.join(certDir, 'etc', 'certs'), { recursive: true });
      writeFileSync(path.join(certDir, 'etc', 'certs', 'cert-chain.pem'), identity.cert);
      writeFileSync(path.join(certDir, 'etc', 'certs', 'key.pem'), identity.key);
      writeFileSync(path.join(certDir, 'etc', 'certs', 'root-cert.pem'), identity.cert);
      [port, tlsPort, adsTlsPort] = [await freePort(), await freePort(), await freePort()];
      ads = await startTestAds();
      ads.set(TYPE_URL.cluster, clusters());
      ads.set(TYPE_URL.endpoint, [cla('eds-backend', [b.port])]);
      ads.set(TYPE_URL.listener, listeners());
      ads.set(TYPE_URL.secret, [secret('server-cert', serverCert)]);
      // FILE_MOUNTED_CERTS: the agent's secret manager owns `default` and `ROOTCA`, not ADS.
      proxy = await startProxy(() => adsBootstrap(ads.port, delta), { env: { FILE_MOUNTED_CERTS: 'true' }, cwd: certDir, args: ['--concurrency', String(workers)] });
      stream = await ads.stream();
    });
    after(() => cleanup(() => proxy?.stop(), () => ads?.close(), () => a?.close(), () => b?.close(),
      () => identity?.remove(), () => attacker?.remove(), () => serverCert?.remove(), () => certDir && rmSync(certDir, { recursive: true, force: true })));

    test('defect 1: an undecodable Cluster refuses the whole response; the live cluster keeps serving', async () => {
      await baseline();
      await assertServes('before');
      const rejectedBefore = (await proxy.stat('cluster_manager.cds.update_rejected')) ?? 0;
      const nonce = delta
        ? stream.sendDelta({ type_url: TYPE_URL.cluster, resources: [{ name: 'backend', version: 'bad', resource: UNDECODABLE_CLUSTER }] })
        : stream.sendSotw({ type_url: TYPE_URL.cluster, resources: [any(edsCluster('eds-backend')), UNDECODABLE_CLUSTER] });
      const reply = await stream.reply(nonce);
      await assertServes('after');
      const name = delta ? 'backend' : 'resources\\[1\\]';
      assert.match(reply.error_detail?.message ?? 'ACK', new RegExp(`^${name}: cannot decode type\\.googleapis\\.com/envoy\\.config\\.cluster\\.v3\\.Cluster`));
      assert.equal(await proxy.stat('cluster_manager.cds.update_rejected'), rejectedBefore + 1);
      const dumped = await activeCluster(proxy, 'backend');
      assert.ok(dumped?.version_info, 'backend is still an active cluster');
      // Delta names the resource, so config_dump shows its error; SotW bytes that do not decode carry no name.
      if (delta) assert.match(errorDetails(dumped) ?? '', /cannot decode/);
    });

    test('defect 1: an Any of another type in a CDS response refuses it whole, naming the resource', async () => {
      await baseline();
      const intruder = any(httpListener('intruder', 1));
      const nonce = delta
        ? stream.sendDelta({ type_url: TYPE_URL.cluster, resources: [{ name: 'backend', version: 'bad', resource: intruder }] })
        : stream.sendSotw({ type_url: TYPE_URL.cluster, resources: [any(edsCluster('eds-backend')), intruder] });
      const reply = await stream.reply(nonce);
      await assertServes('after-intruder');
      assert.match(reply.error_detail?.message ?? 'ACK', new RegExp(`^${delta ? 'backend' : 'resources\\[1\\]'}: type URL type\\.googleapis\\.com/envoy\\.config\\.listener\\.v3\\.Listener does not match the message-wide type URL ${TYPE_URL.cluster.replace(/\./g, '\\.')}`));
      assert.ok(await activeCluster(proxy, 'backend'));
      if (delta) assert.match(errorDetails(await activeCluster(proxy, 'backend')) ?? '', /does not match/);
    });

    test('issue 9 defect 9: an unknown typed_config deep in a listener is NACKed by the listener\'s name; it keeps serving', async () => {
      await baseline();
      assert.equal(await servedBy(port), 'http');
      const bad = listenerWithUnknownFilter('http', port);
      const nonce = delta
        ? stream.sendDelta({ type_url: TYPE_URL.listener, resources: [{ name: 'http', version: 'bad', resource: bad }] })
        : stream.sendSotw({ type_url: TYPE_URL.listener, resources: [bad, ...listeners().slice(1).map(any)] });
      const reply = await stream.reply(nonce);
      await assertServes('still-listening');
      assert.match(reply.error_detail?.message ?? 'ACK', /^http: filter_chains\[0\]\.filters\[0\]\.typed_config: unknown type URL type\.googleapis\.com\/acme\.filters\.v1\.Unknown$/);
      const entry = await dynamicListener(proxy, 'http');
      assert.ok(entry?.active_state, 'the last good listener is still active');
      assert.match(errorDetails(entry) ?? '', /unknown type URL type\.googleapis\.com\/acme\.filters\.v1\.Unknown/);
      assert.equal((await send(TYPE_URL.listener, listeners())).error, undefined);
      assert.equal(errorDetails(await dynamicListener(proxy, 'http')), undefined, 'accepted again: the error state clears');
    });

    test('defect 2: Secrets nobody subscribed to over ADS are ignored; the workload identity stays', async () => {
      await baseline();
      assert.equal(await servedCn(tlsPort), 'workload.example');
      assert.equal(await servedCn(adsTlsPort), 'server.example');
      // Secret is a subscribed type here (server-cert): the response is ACKed, its unasked names ignored.
      const replace = await send(TYPE_URL.secret, [secret('server-cert', serverCert), secret('default', attacker)], { removed: ['ROOTCA'] });
      assert.equal(replace.error, undefined);
      assert.equal(await servedCn(tlsPort), 'workload.example', 'the agent\'s `default` was not replaced');
      if (delta) {
        assert.equal((await send(TYPE_URL.secret, [], { removed: ['default', 'ROOTCA'] })).error, undefined);
        assert.equal(await servedCn(tlsPort), 'workload.example', 'nor removed');
      }
      assert.equal(await servedCn(adsTlsPort), 'server.example');
      const dumped = (await dumpEntries(proxy, 'dynamic_active_secrets')).map((s) => s.name);
      assert.deepEqual(dumped, ['server-cert']);
    });

    test('defect 2: a response for a type nothing subscribed to is ignored, never answered (an empty-names request means wildcard)', async () => {
      await baseline();
      const ext = { '@type': TYPE_URL.extension, name: 'surprise', typed_config: { '@type': T.router } };
      const ignored = delta
        ? stream.sendDelta({ type_url: TYPE_URL.extension, resources: [{ name: 'surprise', version: '1', resource: any(ext) }] })
        : stream.sendSotw({ type_url: TYPE_URL.extension, resources: [any(ext)] });
      // Responses are handled in order: once a later one is answered, the earlier one was handled.
      assert.equal((await send(TYPE_URL.endpoint, [cla('eds-backend', [b.port])])).error, undefined);
      assert.equal(stream.requests.find((r) => r.response_nonce === ignored), undefined, 'no ACK/NACK for an unsubscribed type');
      assert.equal(stream.requests.filter((r) => r.type_url === TYPE_URL.extension).length, 0, 'no request for that type at all');
    });

    test('defect 2: EDS for a cluster nobody has is not stored', async () => {
      await baseline();
      const reply = await send(TYPE_URL.endpoint, [cla('eds-backend', [b.port]), cla('ghost', [a.port])]);
      assert.equal(reply.error, undefined);
      const eps = (await dumpEntries(proxy, 'dynamic_endpoint_configs', '&include_eds')).map((e) => (e.endpoint_config as Json).cluster_name);
      assert.deepEqual(eps, ['eds-backend']);
    });

    test('defect 4: duplicate names in one response are refused', async () => {
      await baseline();
      if (delta) {
        const twice = await send(TYPE_URL.cluster, [staticCluster('backend', b.port), staticCluster('backend', a.port)]);
        assert.equal(twice.error, 'backend: duplicate name backend found among added/updated resources');
        await assertServes('dup-added');
        const both = await send(TYPE_URL.cluster, [staticCluster('backend', b.port)], { removed: ['backend'] });
        assert.equal(both.error, 'backend: duplicate name backend found in the union of added+removed resources');
        await assertServes('dup-removed');
        assert.match(errorDetails(await activeCluster(proxy, 'backend')) ?? '', /duplicate name backend/);
      } else {
        // Envoy's CDS: the first copy stands, later copies are refused by name.
        const twice = await send(TYPE_URL.cluster, [staticCluster('backend', a.port), staticCluster('backend', b.port), edsCluster('eds-backend')]);
        assert.equal(twice.error, 'backend: duplicate cluster backend found');
        await assertServes('dup-first-copy');
        assert.match(errorDetails(await activeCluster(proxy, 'backend')) ?? '', /duplicate cluster backend found/);
      }
    });

    test('a flood of responses is applied in order, each answered, the last one standing', async () => {
      await baseline();
      const nonces: string[] = [];
      for (let i = 0; i < 200; i++) {
        const target = i % 2 === 0 ? b.port : a.port;
        const jsons = [staticCluster('backend', target), edsCluster('eds-backend')];
        nonces.push(delta
          ? stream.sendDelta({ type_url: TYPE_URL.cluster, resources: jsons.map((j) => ({ name: String(j.name), version: String(i), resource: any(j) })) })
          : stream.sendSotw({ type_url: TYPE_URL.cluster, version_info: String(i), resources: jsons.map(any) }));
      }
      const last = await stream.reply(nonces[nonces.length - 1], 30_000);
      assert.equal(last.error_detail, undefined);
      assert.equal(nonces.filter((n) => stream.requests.some((r) => r.response_nonce === n)).length, 200, 'every response answered');
      await assertServes('after-flood');
    });

    test('defect 6: bytes that are not a DiscoveryResponse reset the stream; the client reconnects and keeps serving', async () => {
      await baseline();
      const old = stream;
      const answered = old.requests.length;
      old.sendRaw(Buffer.from([0xff, 0xff, 0xff, 0xff]));
      stream = await ads.waitFor(() => !old.open && ads.streams.find((s) => s !== old && s.open), 'a new stream after the reset', 15_000);
      await ads.waitFor(() => stream.requests.some((r) => r.type_url === TYPE_URL.listener && r.response_nonce !== ''), 'LDS re-synced on the new stream', 15_000);
      assert.equal(old.requests.length, answered, 'no ACK/NACK: the bytes name no type or nonce to answer');
      await assertServes('after-reset');
      assert.equal(await servedCn(tlsPort), 'workload.example');
    });
  });
}
