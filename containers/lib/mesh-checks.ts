/**
 * What `./dev demo` checks, against compose.yaml's mesh: requests across the sidecars with mTLS
 * (the server's sidecar names the caller's SPIFFE id, plaintext is refused), a policy denial (an
 * AuthorizationPolicy: ratings answers reviews only) and a live config edit (reviews v1 → v2 by
 * editing the Istio YAML the mesh runs from). Each check returns what it saw, or throws why not.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { ComposeMesh } from './compose-mesh.ts';

export interface MeshCheck { readonly name: string; run(mesh: ComposeMesh): Promise<string> }

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** `fetch(url)` inside a container: `<status> <body>` on stdout, or `ERR <code>` when the request fails. */
const FETCH = (url: string, method: string): string =>
  `fetch(${JSON.stringify(url)}, { method: ${JSON.stringify(method)}, signal: AbortSignal.timeout(10000) }).then(async (r) => console.log(r.status + ' ' + await r.text()), (e) => console.log('ERR ' + (e.cause?.code ?? e.name)))`;

/** A request from inside a service's container (its app: through the pod's capture). */
export async function fetchIn(mesh: ComposeMesh, service: string, url: string, method = 'GET'): Promise<{ status: number | 'ERR'; body: string }> {
  const r = await mesh.nodeIn(service, FETCH(url, method));
  if (r.code !== 0) throw new Error(`node in ${service}: ${r.stderr.trim().slice(-300)}`);
  const out = r.stdout.trim();
  const sp = out.indexOf(' ');
  const head = out.slice(0, sp);
  return { status: head === 'ERR' ? 'ERR' : Number(head), body: out.slice(sp + 1) };
}

async function page(mesh: ComposeMesh): Promise<string> {
  const res = await fetch(`http://127.0.0.1:${mesh.opts.ingressPort}/productpage`, { signal: AbortSignal.timeout(15_000) });
  const body = await res.text();
  if (res.status !== 200) throw new Error(`GET /productpage through the ingress gateway: ${res.status} ${body.slice(0, 200)}`);
  return body;
}

const version = (body: string): string => /reviews-(v\d)/.exec(body)?.[1] ?? 'none';

export const MESH_CHECKS: readonly MeshCheck[] = [
  {
    name: 'ingress gateway → productpage → details, reviews',
    async run(mesh) {
      const body = await page(mesh);
      if (!body.includes('details: by William Shakespeare')) throw new Error(`no details on the page: ${body.slice(0, 300)}`);
      if (version(body) !== 'v1') throw new Error(`expected reviews-v1 (reviews.yaml), got ${version(body)}`);
      return '200 with details and reviews-v1';
    },
  },
  {
    name: 'productpage → reviews over mTLS (SPIFFE id)',
    async run(mesh) {
      const r = await fetchIn(mesh, 'productpage-v1', 'http://reviews:9080/reviews/0');
      if (r.status !== 200) throw new Error(`${r.status} ${r.body.slice(0, 200)}`);
      const peer = (JSON.parse(r.body) as { peer?: string }).peer ?? '';
      if (!peer.includes('URI=spiffe://cluster.local/ns/default/sa/bookinfo-productpage')) throw new Error(`reviews saw x-forwarded-client-cert ${JSON.stringify(peer)}`);
      return 'reviews saw spiffe://cluster.local/ns/default/sa/bookinfo-productpage';
    },
  },
  {
    name: 'plaintext from outside the mesh is refused (STRICT)',
    async run(mesh) {
      const r = await fetchIn(mesh, 'kube', 'http://reviews-v1:9080/reviews/0');
      if (r.status !== 'ERR') throw new Error(`a plaintext request got ${r.status} ${r.body.slice(0, 200)}`);
      return `the sidecar closed the plaintext connection (${r.body})`;
    },
  },
  {
    name: 'AuthorizationPolicy: productpage → ratings denied',
    async run(mesh) {
      const r = await fetchIn(mesh, 'productpage-v1', 'http://ratings:9080/ratings/0');
      if (r.status !== 403 || !r.body.includes('RBAC: access denied')) throw new Error(`expected 403 RBAC: access denied, got ${r.status} ${r.body.slice(0, 200)}`);
      const allowed = await fetchIn(mesh, 'reviews-v2', 'http://ratings:9080/ratings/0');
      if (allowed.status !== 200) throw new Error(`reviews (allowed) got ${allowed.status} ${allowed.body.slice(0, 200)}`);
      return '403 RBAC: access denied; reviews → ratings 200';
    },
  },
  {
    name: 'live edit: reviews.yaml subset v1 → v2',
    run: (mesh) => liveEditToV2(path.join(mesh.configDir, 'reviews.yaml'), () => page(mesh)),
  },
];

/**
 * Edits reviews' route in `file` (subset v1 → v2) while the mesh runs, then loads pages until one is
 * from reviews-v2, and ten more in a row, each with ratings' stars (reviews-v2 → ratings); puts the
 * file back either way.
 */
export async function liveEditToV2(file: string, load: () => Promise<string>): Promise<string> {
  const before = readFileSync(file, 'utf8');
  if (!before.includes('subset: v1 }')) throw new Error(`${file} has no "subset: v1 }" to edit`);
  writeFileSync(file, before.replace('subset: v1 }', 'subset: v2 }'));
  const t0 = Date.now();
  try {
    let last = '';
    while (Date.now() - t0 < 60_000) {
      last = version(await load());
      if (last === 'v2') {
        for (let i = 0; i < 10; i++) {
          const b = await load();
          if (version(b) !== 'v2' || !b.includes('★')) throw new Error(`page ${i} after the switch: reviews-${version(b)}, stars ${b.includes('★')}`);
        }
        return `reviews-v2 with stars after ${((Date.now() - t0) / 1000).toFixed(1)} s, 10 of 10 pages`;
      }
      await sleep(500);
    }
    throw new Error(`still reviews-${last} 60 s after the edit`);
  } finally {
    writeFileSync(file, before);
  }
}

export async function runMeshChecks(mesh: ComposeMesh, checks: readonly MeshCheck[] = MESH_CHECKS): Promise<Array<{ name: string; ok: boolean; detail: string }>> {
  const out = [];
  for (const c of checks) {
    try { out.push({ name: c.name, ok: true, detail: await c.run(mesh) }); } catch (err) { out.push({ name: c.name, ok: false, detail: (err as Error).message }); }
  }
  return out;
}
