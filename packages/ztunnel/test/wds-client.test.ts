// The WDS stream end to end: skua-controlplane serves Address and Authorization from watched files
// over Delta ADS; ztunnel's client subscribes with its node id and token, fills the state, follows
// edits and removals, NACKs a resource it cannot use by name, and keeps the last good state while
// the control plane is down, resyncing when it returns on the same port.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Snapshot } from '../../controlplane/src/ads/snapshot.ts';
import { AdsServer } from '../../controlplane/src/ads/server.ts';
import { FileSource } from '../../controlplane/src/files.ts';
import { StatsStore, TYPE_URL, type AdsClient } from '../src/core.ts';
import { loadConfig } from '../src/config.ts';
import { ProxyState } from '../src/state/store.ts';
import { WdsHandler } from '../src/state/updater.ts';
import { startWdsClient } from '../src/xds-client.ts';
import { waitFor } from './lib/wait.ts';

type Json = Record<string, unknown>;
const ip = (s: string): string => Buffer.from(s.split('.').map(Number)).toString('base64');
const workload = (name: string, addr: string, extra: Json = {}): Json => ({
  '@type': TYPE_URL.address,
  workload: { uid: `Kubernetes//Pod/default/${name}`, name, namespace: 'default', addresses: [ip(addr)], tunnel_protocol: 'HBONE', service_account: name, ...extra },
});
const POLICY = { '@type': TYPE_URL.authorization, name: 'allow-a', namespace: 'default', scope: 'NAMESPACE', rules: [{ clauses: [{ matches: [{ principals: [{ exact: 'cluster.local/ns/default/sa/a' }] }] }] }] };

describe('WDS client over Delta ADS', () => {
  let dir: string, files: FileSource, snapshot: Snapshot, server: AdsServer, port: number, client: AdsClient, synced = 0;
  const state = new ProxyState();
  const write = (resources: Json[]): void => {
    writeFileSync(join(dir, '.wds.tmp'), JSON.stringify({ resources }));
    renameSync(join(dir, '.wds.tmp'), join(dir, 'wds.json'));
  };
  const startServer = async (p: number): Promise<number> => {
    server = new AdsServer(snapshot);
    return server.listen(`127.0.0.1:${p}`);
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'skua-zt-wds-'));
    write([workload('a', '10.1.0.1'), workload('b', '10.1.0.2'), POLICY]);
    snapshot = new Snapshot();
    files = new FileSource(dir);
    snapshot.set(files.scan());
    files.watch((groups) => snapshot.set(groups), 20);
    port = await startServer(0);
    const env = { XDS_ADDRESS: `http://127.0.0.1:${port}`, AUTH_TOKEN: 'jwt-static', POD_NAME: 'ztunnel-x', POD_NAMESPACE: 'istio-system', INSTANCE_IP: '10.9.9.9', NODE_NAME: 'node-1' };
    client = startWdsClient(loadConfig(env, tmpdir()), new WdsHandler(state, () => synced++), new StatsStore(), env);
  });
  after(async () => {
    client?.stop();
    files?.close();
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  test('subscribes as ztunnel and fills the state', async () => {
    await waitFor(() => state.workloadsByUid.size === 2 && state.allPolicies().length === 1, 'the initial WDS state');
    assert.equal(synced, 1);
    const proxy = [...server.proxies][0];
    assert.equal(proxy.nodeId, 'ztunnel~10.9.9.9~ztunnel-x.istio-system~istio-system.svc.cluster.local');
    assert.equal(proxy.delta, true);
    assert.equal((proxy.node.metadata as Json).NODE_NAME, 'node-1');
    assert.equal(state.workloadByAddress('', '10.1.0.2')?.identity, 'spiffe://cluster.local/ns/default/sa/b');
  });

  test('edits and removals follow; a resource ztunnel cannot use is NACKed by name, the rest applies', async () => {
    write([workload('a', '10.1.0.11'), workload('legacy', '10.1.0.3', { tunnel_protocol: 'LEGACY_ISTIO_MTLS' })]);
    await waitFor(() => state.workloadByAddress('', '10.1.0.11') !== undefined && state.allPolicies().length === 0, 'the edit applied');
    assert.equal(state.workloadsByUid.get('Kubernetes//Pod/default/b'), undefined);
    assert.equal(state.workloadsByUid.get('Kubernetes//Pod/default/legacy'), undefined);
    await waitFor(() => [...server.proxies].some((p) => /Kubernetes\/\/Pod\/default\/legacy: workload\.tunnel_protocol: unsupported tunnel protocol/.test(p.lastNack)), 'the NACK');
    assert.match(client.lastError.get(TYPE_URL.address) ?? '', /legacy/);
  });

  test('the control plane goes away: the state keeps serving; it comes back: resync', async () => {
    await server.close();
    await waitFor(() => !client.connected, 'the stream noticed');
    assert.equal(state.workloadByAddress('', '10.1.0.11')?.name, 'a');
    write([workload('a', '10.1.0.11'), workload('c', '10.1.0.4')]);
    await startServer(port);
    await waitFor(() => state.workloadByAddress('', '10.1.0.4')?.name === 'c', 'resynced after the restart', 15_000);
  });
});
