/**
 * compose.yaml's ambient profile, checked: the ambient pods are set up (each pod's cni-plugin
 * container done, ztunnel and the waypoint ready, a page served through ztunnel), then what the
 * demo shows of ambient mode — an app's request crossing ztunnel → HBONE (mutual TLS, both SPIFFE
 * ids in ztunnel's metrics and access log) → ztunnel, plaintext from outside the mesh refused by
 * ztunnel (STRICT), an L7 denial at the waypoint (403 "RBAC: access denied", counted with
 * reporter="waypoint"), and a live edit of the route the waypoint applies, with no restart.
 */
import path from 'node:path';
import { AMBIENT_PODS, logLine, logsOf, type ComposeMesh } from './compose-mesh.ts';
import { engineEnv, run } from './engine.ts';
import { fetchIn, liveEditToV2, type MeshCheck } from './mesh-checks.ts';

const SPIFFE = (sa: string): string => `spiffe://cluster.local/ns/ambient/sa/${sa}`;
/** The ambient pod the checks send from when any client will do (not productpage: the policy names it). */
const CLIENT = 'ambient-ratings-v1';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A local URL fetched inside a container (ztunnel's or the waypoint's own ports); '' when it fails. */
async function localText(mesh: ComposeMesh, service: string, url: string): Promise<string> {
  const r = await mesh.nodeIn(service, `fetch(${JSON.stringify(url)}).then((r) => r.text()).then((t) => process.stdout.write(t), () => {})`);
  return r.stdout;
}

/** The sum of a metric's series whose labels include all of `want`. */
export function metricSum(text: string, name: string, want: Record<string, string>): number {
  let sum = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith(`${name}{`)) continue;
    if (Object.entries(want).every(([k, v]) => line.includes(`${k}="${v}"`))) sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  }
  return sum;
}

async function inspect(mesh: ComposeMesh, service: string, format: string): Promise<string> {
  const r = await run(mesh.opts.engine, ['inspect', '--format', format, mesh.container(service)], { env: engineEnv(mesh.opts.engine) });
  return r.code === 0 ? r.stdout.trim() : `(inspect failed: ${r.stderr.trim()})`;
}

async function waitUntil(what: string, deadline: number, probe: () => Promise<string | undefined>): Promise<void> {
  let last = '';
  while (Date.now() < deadline) {
    const problem = await probe();
    if (problem === undefined) return;
    last = problem;
    await sleep(1000);
  }
  throw new Error(`${what}: ${last}`);
}

/** Waits until the ambient profile serves: every pod announced, ztunnel and the waypoint ready, the ambient page served. */
export async function ambientReady(mesh: ComposeMesh, timeoutMs = 240_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  for (const pod of AMBIENT_PODS) {
    await waitUntil(`ambient-${pod}-cni did not finish`, deadline, async () => {
      const state = await inspect(mesh, `ambient-${pod}-cni`, '{{.State.Status}} {{.State.ExitCode}}');
      return state === 'exited 0' ? undefined : `${state}\n${(await logsOf(mesh, `ambient-${pod}-cni`)).slice(-1500)}`;
    });
  }
  await waitUntil('ztunnel is not ready', deadline, async () => {
    const ready = await localText(mesh, 'ztunnel', 'http://127.0.0.1:15021/healthz/ready');
    return ready.trim() === 'ready' ? undefined : `${ready.trim() || 'no answer'}\n${(await logsOf(mesh, 'ztunnel')).slice(-2000)}`;
  });
  const left = Math.max(5, Math.round((deadline - Date.now()) / 1000));
  const wp = await run(mesh.opts.engine, ['exec', mesh.container('waypoint'), 'pilot-agent', 'wait', '--timeoutSeconds', String(left)], { env: engineEnv(mesh.opts.engine), timeoutMs: (left + 10) * 1000 });
  if (wp.code !== 0) throw new Error(`the waypoint is not ready: ${wp.stderr.trim()}\n${(await logsOf(mesh, 'waypoint')).slice(-3000)}`);
  await waitUntil('the ambient productpage does not serve', deadline, async () => {
    const r = await fetchIn(mesh, CLIENT, 'http://productpage:9080/productpage');
    return r.status === 200 && r.body.includes('reviews-v1') && r.body.includes('by William Shakespeare') ? undefined : `${r.status} ${r.body.slice(0, 300)}`;
  });
}

async function ambientPage(mesh: ComposeMesh): Promise<string> {
  const r = await fetchIn(mesh, CLIENT, 'http://productpage:9080/productpage');
  if (r.status !== 200) throw new Error(`GET productpage.ambient from ${CLIENT}: ${r.status} ${r.body.slice(0, 200)}`);
  return r.body;
}

export const AMBIENT_CHECKS: readonly MeshCheck[] = [
  {
    name: 'ambient productpage → details: ztunnel → HBONE (mTLS) → ztunnel',
    async run(mesh) {
      const series = { reporter: 'destination', source_principal: SPIFFE('bookinfo-productpage'), destination_principal: SPIFFE('bookinfo-details'), connection_security_policy: 'mutual_tls' };
      const before = metricSum(await localText(mesh, 'ztunnel', 'http://127.0.0.1:15020/metrics'), 'istio_tcp_connections_opened_total', series);
      const r = await fetchIn(mesh, 'ambient-productpage-v1', 'http://details:9080/details/0');
      if (r.status !== 200 || !r.body.includes('William Shakespeare')) throw new Error(`${r.status} ${r.body.slice(0, 200)}`);
      const after = metricSum(await localText(mesh, 'ztunnel', 'http://127.0.0.1:15020/metrics'), 'istio_tcp_connections_opened_total', series);
      if (after <= before) throw new Error(`istio_tcp_connections_opened_total{reporter="destination", productpage → details, mutual_tls} did not grow (${before} → ${after})`);
      const line = await logLine(mesh, 'ztunnel', (l) => l.includes('direction="inbound"')
        && l.includes(`src.identity="${SPIFFE('bookinfo-productpage')}"`) && l.includes(`dst.identity="${SPIFFE('bookinfo-details')}"`));
      if (!line) throw new Error('no inbound access log line from productpage\'s to details\' SPIFFE id in ztunnel\'s log');
      const hbone = /dst\.addr=(\S+:15008)/.exec(line)?.[1];
      if (!hbone) throw new Error(`the inbound connection did not arrive on HBONE's 15008: ${line}`);
      return `details answered; ztunnel: ${after - before} new mutual_tls connection(s) ${SPIFFE('bookinfo-productpage')} → ${SPIFFE('bookinfo-details')} on ${hbone}`;
    },
  },
  {
    name: 'plaintext from outside the mesh to an ambient pod is refused (STRICT)',
    async run(mesh) {
      const r = await fetchIn(mesh, 'kube', 'http://ambient-details-v1:9080/details/0');
      if (r.status !== 'ERR') throw new Error(`a plaintext request got ${r.status} ${r.body.slice(0, 200)}`);
      const line = await logLine(mesh, 'ztunnel', (l) => l.includes('dst.workload="details-v1"') && l.includes('policy rejection'));
      if (!line) throw new Error('ztunnel logged no policy rejection for details-v1');
      return `ztunnel closed it (${r.body}): ${/error="([^"]*)"/.exec(line)?.[1] ?? line}`;
    },
  },
  {
    name: 'waypoint L7 policy: ambient ratings → reviews denied',
    async run(mesh) {
      // No destination_service here: a request denied before routing is labelled with its authority (reviews:9080).
      const series = { reporter: 'waypoint', source_workload: 'ratings-v1', destination_service_namespace: 'ambient', response_code: '403' };
      const metrics = (): Promise<string> => localText(mesh, 'waypoint', 'http://127.0.0.1:15020/stats/prometheus');
      const before = metricSum(await metrics(), 'istio_requests_total', series);
      const denied = await fetchIn(mesh, CLIENT, 'http://reviews:9080/reviews/0');
      if (denied.status !== 403 || denied.body !== 'RBAC: access denied') throw new Error(`ratings → reviews: expected 403 RBAC: access denied, got ${denied.status} ${denied.body.slice(0, 200)}`);
      const post = await fetchIn(mesh, 'ambient-productpage-v1', 'http://reviews:9080/reviews/0', 'POST');
      if (post.status !== 403) throw new Error(`productpage POST → reviews: expected 403, got ${post.status} ${post.body.slice(0, 200)}`);
      const get = await fetchIn(mesh, 'ambient-productpage-v1', 'http://reviews:9080/reviews/0');
      if (get.status !== 200) throw new Error(`productpage GET → reviews (allowed): ${get.status} ${get.body.slice(0, 200)}`);
      const after = metricSum(await metrics(), 'istio_requests_total', series);
      if (after - before !== 1) throw new Error(`the waypoint's istio_requests_total{reporter="waypoint", source_workload="ratings-v1", response_code="403"} went ${before} → ${after}`);
      return '403 RBAC: access denied from the waypoint (counted, reporter="waypoint"); productpage GET 200, POST 403';
    },
  },
  {
    name: 'live edit at the waypoint: ambient reviews.yaml subset v1 → v2, no restart',
    async run(mesh) {
      const started = async (): Promise<string[]> => Promise.all(['istiod', 'ztunnel', 'waypoint'].map((s) => inspect(mesh, s, '{{.State.StartedAt}}')));
      const before = await started();
      const result = await liveEditToV2(path.join(mesh.ambientConfigDir, 'reviews.yaml'), () => ambientPage(mesh));
      const after = await started();
      if (after.join() !== before.join()) throw new Error(`a container restarted meanwhile (istiod, ztunnel, waypoint started at ${before.join(', ')} → ${after.join(', ')})`);
      return `${result}; istiod, ztunnel and the waypoint not restarted`;
    },
  },
];
