/**
 * The mesh: productpage → reviews v1/v2 (80/20, `x-canary: true` → v2), each app with its own
 * skua-proxy sidecar configured over ADS by skua-controlplane from a generated mesh file
 * (mesh-file.ts), STRICT mTLS between sidecars with workload certificates from the control plane's
 * CA (each sidecar holds a token minted by `skua-controlplane token`). `capture: none`: every
 * sidecar binds loopback addresses of its own, and productpage calls reviews through its sidecar's
 * outbound address. Mid-run the demo edits the mesh file (weights 0/100) and checks that it applies.
 *
 *   load ─▶ productpage app ─▶ productpage sidecar 127.0.21.11:P ══mTLS══▶ reviews-v1 sidecar 127.0.20.21:P ─▶ reviews v1 app
 *                                                                    ╚═══▶ reviews-v2 sidecar 127.0.20.22:P ─▶ reviews v2 app
 */
import { execFile } from 'node:child_process';
import { mkdirSync, renameSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { freePort, get, getFrom, HOST, type Reply } from '../lib/net.ts';
import { eventually, expect, stats } from '../lib/checks.ts';
import { toYaml } from '../lib/yaml.ts';
import type { Check, ProcessSpec, Topology, TopologyOptions } from '../lib/topology.ts';
import { meshDoc, NAMESPACE, sidecarBootstrap, spiffeId, WORKLOADS, type Split, type Workload } from './mesh-file.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');
const CONTROLPLANE = 'packages/controlplane/src/main.ts';
export const MESH_SPLIT: Split = { v1: 80, v2: 20 };
const EDITED_SPLIT: Split = { v1: 0, v2: 100 };

type Key = keyof typeof WORKLOADS;
const KEYS: readonly Key[] = ['reviewsV1', 'reviewsV2', 'productpage'];

export interface MeshPorts {
  /** The services' port (Bookinfo's 9080), bound by every sidecar on its own addresses. */
  service: number;
  xds: number; ca: number;
  apps: Record<Key, number>;
  admins: Record<Key, number>;
}

export async function meshPorts(): Promise<MeshPorts> {
  const used = new Set<number>();
  const next = async (): Promise<number> => {
    let port = await freePort();
    while (used.has(port)) port = await freePort();
    used.add(port);
    return port;
  };
  const service = await next(), xds = await next(), ca = await next();
  const apps = { productpage: await next(), reviewsV1: await next(), reviewsV2: await next() };
  const admins = { productpage: await next(), reviewsV1: await next(), reviewsV2: await next() };
  return { service, xds, ca, apps, admins };
}

/** Writes then renames, so the control plane's watcher never reads half a file. */
function writeAtomic(file: string, text: string): void {
  writeFileSync(`${file}.tmp`, text);
  renameSync(`${file}.tmp`, file);
}

function checks(p: MeshPorts, meshFile: string): Check[] {
  const pp = WORKLOADS.productpage;
  const reviewsHost = `reviews:${p.service}`;
  // What productpage's app does: call reviews through its sidecar's outbound listener.
  const viaSidecar = (headers: Record<string, string> = {}): Promise<Reply> => getFrom(pp.outboundIp, p.service, '/reviews/1', { host: reviewsHost, ...headers }, 3000);
  const versions = async (n: number, parallel = 8): Promise<Record<string, number>> => {
    const seen: Record<string, number> = {};
    let left = n;
    await Promise.all(Array.from({ length: parallel }, async () => {
      while (left-- > 0) {
        const r = await viaSidecar();
        expect(r.status === 200, `got ${r.status} ${r.body.slice(0, 120)}`);
        const v = String(r.headers['x-reviews-version']);
        seen[v] = (seen[v] ?? 0) + 1;
      }
    }));
    return seen;
  };
  const editMesh = (split: Split): void => writeAtomic(meshFile, toYaml(meshDoc(p.service, p.apps, split)));
  return [
    { name: 'ADS: 3 sidecars connected, config applied', run: async () => {
      const t0 = performance.now();
      for (const k of KEYS) {
        await eventually(`${WORKLOADS[k].name}'s sidecar to take LDS`, async () => {
          const s = await stats(p.admins[k], WORKLOADS[k].ip);
          return s.get('control_plane.connected_state') === 1 && (s.get('listener_manager.lds.update_success') ?? 0) >= 1 ? true : undefined;
        });
      }
      // The first call also waits for the sidecars' certificates (SDS from the control plane's CA).
      await eventually('productpage → reviews through the sidecars', async () => ((await viaSidecar()).status === 200 ? true : undefined));
      return `serving ${Math.round(performance.now() - t0)} ms after the sidecars were ready`;
    } },
    { name: 'productpage app → reviews   GET /productpage', run: async () => {
      const r = await get(p.apps.productpage, '/productpage', {}, 5000);
      expect(r.status === 200 && r.body.includes('Comedy of Errors'), `got ${r.status} ${r.body.slice(0, 120)}`);
      return `${r.status} via reviews ${r.headers['x-reviews-version']}`;
    } },
    { name: 'mTLS: reviews sees productpage\'s SPIFFE id', run: async () => {
      const r = await viaSidecar();
      const peer = String((JSON.parse(r.body) as { peer?: string }).peer);
      const uri = /URI=([^;,]+)/.exec(peer)?.[1];
      expect(r.status === 200 && uri === spiffeId(pp), `got ${r.status}, x-forwarded-client-cert ${JSON.stringify(peer)} (want URI=${spiffeId(pp)})`);
      return `x-forwarded-client-cert URI=${uri}`;
    } },
    { name: 'STRICT: plaintext to a sidecar refused', run: async () => {
      const w = WORKLOADS.reviewsV1;
      const r = await getFrom(w.ip, p.service, '/reviews/1', { host: reviewsHost }, 3000).then((x) => `answered ${x.status}`, (err: Error & { code?: string }) => err.code ?? err.message);
      expect(!r.startsWith('answered'), `plaintext to ${w.ip}:${p.service} ${r}`);
      return `${w.ip}:${p.service} (reviews-v1 inbound): ${r}`;
    } },
    { name: 'header match  x-canary: true → v2', run: async () => {
      for (let i = 0; i < 20; i++) {
        const r = await viaSidecar({ 'x-canary': 'true' });
        expect(r.status === 200 && r.headers['x-reviews-version'] === 'v2', `request ${i + 1}: ${r.status} from ${r.headers['x-reviews-version']}`);
      }
      return '20 of 20 from reviews v2';
    } },
    { name: `weighted split ${MESH_SPLIT.v1}/${MESH_SPLIT.v2} (400 requests)`, run: async () => {
      const seen = await versions(400);
      const v1 = (seen.v1 ?? 0) / 400;
      // ±4σ of Binomial(400, 0.8) is ±8 points.
      expect(Math.abs(v1 - MESH_SPLIT.v1 / 100) <= 0.08, `v1 ${seen.v1 ?? 0} / v2 ${seen.v2 ?? 0}`);
      return `v1 ${seen.v1 ?? 0} / v2 ${seen.v2 ?? 0}`;
    } },
    { name: `live mesh edit: weights ${EDITED_SPLIT.v1}/${EDITED_SPLIT.v2}`, run: async () => {
      const t0 = performance.now();
      editMesh(EDITED_SPLIT);
      await eventually('all of reviews on v2', async () => ((await versions(20, 4)).v1 === undefined ? true : undefined));
      const ms = Math.round(performance.now() - t0);
      const seen = await versions(100);
      expect(seen.v1 === undefined, `after the edit: v1 ${seen.v1} / v2 ${seen.v2}`);
      return `applied in ${ms} ms, then 100 of 100 on v2`;
    } },
    { name: `live mesh edit: back to ${MESH_SPLIT.v1}/${MESH_SPLIT.v2}`, run: async () => {
      const t0 = performance.now();
      editMesh(MESH_SPLIT);
      await eventually('reviews v1 back', async () => ((await versions(20, 4)).v1 ? true : undefined));
      return `v1 back in ${Math.round(performance.now() - t0)} ms`;
    } },
  ];
}

/** Mints the workload's token with `skua-controlplane token` and lays out its sidecar's working directory. */
async function provision(w: Workload, stateDir: string, wlDir: string): Promise<void> {
  const { stdout } = await promisify(execFile)(process.execPath,
    [path.join(ROOT, CONTROLPLANE), 'token', '--state-dir', stateDir, '--namespace', NAMESPACE, '--service-account', w.serviceAccount, '--ttl', '1h']);
  mkdirSync(path.join(wlDir, 'var/run/secrets/tokens'), { recursive: true });
  writeFileSync(path.join(wlDir, 'var/run/secrets/tokens/istio-token'), stdout.trim());
}

export function mesh(p: MeshPorts, opts: TopologyOptions): Topology {
  const stateDir = path.join(opts.dir, 'controlplane');
  const meshFile = path.join(opts.dir, 'mesh.yaml');
  const app = (name: string, script: string, port: number, env: Record<string, string> = {}): ProcessSpec =>
    ({ name, script: `demo/apps/${script}`, env: { PORT: String(port), LISTEN_ADDR: HOST, ...env }, ready: { port } });
  const sidecar = (k: Key): ProcessSpec => {
    const w = WORKLOADS[k];
    const wlDir = path.join(opts.dir, w.name);
    return {
      name: `${w.name}-sidecar`,
      script: 'packages/proxy/src/main.ts',
      args: ['-c', path.join(opts.dir, `${w.name}-bootstrap.yaml`), '-l', opts.logLevel, '--concurrency', String(opts.concurrency)],
      // pilot-agent's environment: the secret manager asks CA_ADDR for the workload's certificate.
      env: { CA_ADDR: `${HOST}:${p.ca}`, CA_ROOT_CA: path.join(stateDir, 'root-cert.pem'), TRUST_DOMAIN: 'cluster.local', POD_NAMESPACE: NAMESPACE, SERVICE_ACCOUNT: w.serviceAccount },
      cwd: wlDir,
      prepare: () => provision(w, stateDir, wlDir),
      ready: { admin: p.admins[k], host: w.ip },
      proxy: true,
    };
  };
  const files: Record<string, string> = { 'mesh.yaml': toYaml(meshDoc(p.service, p.apps, MESH_SPLIT)) };
  for (const k of KEYS) files[`${WORKLOADS[k].name}-bootstrap.yaml`] = toYaml(sidecarBootstrap(WORKLOADS[k], p.xds, p.admins[k]));
  const pp = WORKLOADS.productpage;
  const outbound = `http://${pp.outboundIp}:${p.service}`;
  return {
    title: `mesh: productpage → reviews v1/v2, a skua-proxy sidecar each, configured by skua-controlplane from ${meshFile}, STRICT mTLS`,
    files,
    processes: [
      app('reviews-v1', 'reviews.ts', p.apps.reviewsV1, { SERVICE_VERSION: 'v1' }),
      app('reviews-v2', 'reviews.ts', p.apps.reviewsV2, { SERVICE_VERSION: 'v2' }),
      app('productpage', 'productpage.ts', p.apps.productpage, { REVIEWS_URL: outbound, REVIEWS_HOST: `reviews:${p.service}` }),
      {
        name: 'skua-controlplane',
        script: CONTROLPLANE,
        args: ['--mesh', meshFile, '--xds-address', `${HOST}:${p.xds}`, '--ca-address', `${HOST}:${p.ca}`, '--state-dir', stateDir],
        // The CA listens last.
        ready: { port: p.ca },
      },
      ...KEYS.map(sidecar),
    ],
    checks: checks(p, meshFile),
    load: [
      { label: 'GET /productpage', port: p.apps.productpage, path: '/productpage', weight: 60, expect: 200 },
      { label: 'GET /reviews/1 (sidecar)', host: pp.outboundIp, port: p.service, path: '/reviews/1', headers: { host: `reviews:${p.service}` }, weight: 40, expect: 200 },
    ],
    split: { header: 'x-reviews-version', expect: { v1: MESH_SPLIT.v1 / 100, v2: MESH_SPLIT.v2 / 100 } },
    admins: KEYS.map((k) => ({ name: `${WORKLOADS[k].name} sidecar`, port: p.admins[k], host: WORKLOADS[k].ip })),
    stats: /^(control_plane\.connected_state|listener_manager\.lds\.update_success|cluster_manager\.cds\.update_success|xds\.rds\.update_success|cluster\.outbound\|\d+\|v[12]\|reviews\.[\w.]+\.(upstream_rq_2xx|ssl\.handshake)|cluster\.inbound\|\d+\|\|\.upstream_rq_2xx|listener\.[\d._]+\.ssl\.handshake|http\.[\w.]+\.downstream_rq_(total|[2-5]xx))$/,
    urls: [
      `curl -i http://${HOST}:${p.apps.productpage}/productpage          (the productpage app; it calls reviews through its sidecar)`,
      `curl -i -H 'host: reviews:${p.service}' ${outbound}/reviews/1   (productpage's sidecar; the body's "peer" is the xfcc reviews saw)`,
      `curl -i -H 'host: reviews:${p.service}' -H 'x-canary: true' ${outbound}/reviews/1`,
      `edit ${meshFile} (e.g. the split's weights): skua-controlplane pushes the change`,
      ...KEYS.map((k) => `${WORKLOADS[k].name} sidecar admin: http://${WORKLOADS[k].ip}:${p.admins[k]}/  (/config_dump, /stats, /clusters, /certs)`),
    ],
  };
}
