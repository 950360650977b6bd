/**
 * Issue 13's table ("a sidecar people can afford in every pod") computed from scenario results: what
 * skua measured, the anchor measured in the same run, the goal, and whether it is reached. Rows whose
 * scenario did not run say so.
 */
import type { Row, Scenario, ScenarioResult } from './types.ts';

export interface StoredResult extends ScenarioResult { env?: Record<string, string> }

export interface GoalRow {
  what: string;
  scenario: Scenario;
  skua: string;
  anchor: string;
  goal: string;
  status: 'reached' | 'not reached' | 'not measured';
}

const f = (v: number | undefined, d = 1): string => (v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(d));

function row(res: StoredResult | undefined, match: (r: Row, i: number) => boolean): Row | undefined {
  const r = res?.rows.find(match);
  return r && !r.error ? r : undefined;
}

function pairRow(res: StoredResult | undefined, key: string): Row | undefined {
  const proto = key === 'skua-h2' ? 'HTTP/2' : 'HTTP/1.1';
  return row(res, (r) => r.key === key || (key === 'nginx' ? r.target === 'nginx' : r.target === 'skua' && r.label.includes(proto)));
}

const status = (ok: boolean | undefined): GoalRow['status'] => (ok === undefined ? 'not measured' : ok ? 'reached' : 'not reached');

export function issueGoals(results: readonly StoredResult[]): GoalRow[] {
  const by = (s: Scenario): StoredResult | undefined => results.find((r) => r.scenario === s);
  const out: GoalRow[] = [];

  const idle = by('idle');
  const [bare, nginxIdle, skuaIdle] = [row(idle, (r) => r.target === 'direct'), row(idle, (r) => r.target === 'nginx'), row(idle, (r) => r.target === 'skua')];
  out.push({
    what: 'idle proxy, trivial static config', scenario: 'idle',
    skua: skuaIdle ? `${f(skuaIdle.metrics.rssMb)} MB RSS, ${f(skuaIdle.metrics.anonMb)} MB anonymous (bare Node ${f(bare?.metrics.rssMb)} / ${f(bare?.metrics.anonMb)})` : '–',
    anchor: nginxIdle ? `nginx ${f(nginxIdle.metrics.rssMb)} MB RSS, ${f(nginxIdle.metrics.anonMb)} MB anonymous` : '–',
    goal: 'anonymous ≤ 25 MB over bare Node',
    status: status(skuaIdle?.metrics.anonOverNodeMb === undefined ? undefined : skuaIdle.metrics.anonOverNodeMb <= 25),
  });

  const pair = by('sidecar-pair');
  const [nginxPair, h1, h2] = [pairRow(pair, 'nginx'), pairRow(pair, 'skua-h1'), pairRow(pair, 'skua-h2')];
  const rss = (r: Row | undefined): string => (r ? `${f(r.metrics.clientRssMb)} / ${f(r.metrics.serverRssMb)} MB RSS` : '–');
  const maxRss = (r: Row | undefined): number | undefined => (r ? Math.max(r.metrics.clientRssMb, r.metrics.serverRssMb) : undefined);
  const under = (v: number | undefined, goal: number): boolean | undefined => (v === undefined || !Number.isFinite(v) ? undefined : v <= goal);
  out.push({ what: 'sidecar pair at 1,000 rps, HTTP/1.1 mTLS between', scenario: 'sidecar-pair', skua: `${rss(h1)}, +p99 ${f(h1?.metrics.addedP99, 2)} ms`, anchor: `nginx pair ${rss(nginxPair)}, +p99 ${f(nginxPair?.metrics.addedP99, 2)} ms`, goal: '≤ 100 MB RSS each', status: status(under(maxRss(h1), 100)) });
  out.push({ what: 'same, HTTP/2 between', scenario: 'sidecar-pair', skua: `${rss(h2)}, +p99 ${f(h2?.metrics.addedP99, 2)} ms`, anchor: '—', goal: 'same as HTTP/1.1 (≤ 100 MB each)', status: status(under(maxRss(h2), 100)) });
  const cpuRatio = (r: Row | undefined): number | undefined => (r && nginxPair ? r.metrics.vcpuPer1k / nginxPair.metrics.vcpuPer1k : undefined);
  out.push({
    what: 'CPU of the pair per 1,000 rps', scenario: 'sidecar-pair',
    skua: `${f(h1?.metrics.vcpuPer1k, 3)} vCPU = ${f(cpuRatio(h1), 2)}× nginx (HTTP/2: ${f(h2?.metrics.vcpuPer1k, 3)} = ${f(cpuRatio(h2), 2)}×)`,
    anchor: `nginx pair ${f(nginxPair?.metrics.vcpuPer1k, 3)} vCPU`, goal: '≤ 1.2× the nginx pair', status: status(under(cpuRatio(h1), 1.2)),
  });

  const l7 = by('l7');
  const [skuaL7, nginxL7, relayL7] = [row(l7, (r) => r.target === 'skua'), row(l7, (r) => r.target === 'nginx'), row(l7, (r) => r.target === 'node-relay')];
  const l7Ratio = skuaL7 && nginxL7 ? skuaL7.metrics.rps / nginxL7.metrics.rps : undefined;
  // The floor of any Node proxy: the bare relay (no HTTP work) in the same run.
  const relayRatio = relayL7 && nginxL7 ? relayL7.metrics.rps / nginxL7.metrics.rps : undefined;
  out.push({
    what: 'L7 HTTP/1.1 req/s, one worker', scenario: 'l7',
    skua: skuaL7 ? `${f(skuaL7.metrics.rps, 0)} req/s = ${f(l7Ratio, 2)}× nginx, ${f(skuaL7.metrics.cpuUsPerReq)} CPU µs/req` : '–',
    anchor: (nginxL7 ? `nginx ${f(nginxL7.metrics.rps, 0)} req/s, ${f(nginxL7.metrics.cpuUsPerReq)} CPU µs/req` : '–')
      + (relayL7 ? `; bare Node relay (no HTTP) ${f(relayRatio, 2)}× nginx, ${f(relayL7.metrics.cpuUsPerReq)} CPU µs/req` : ''), goal: '≥ 1.0× nginx', status: status(l7Ratio === undefined ? undefined : l7Ratio >= 1),
  });

  const xds = by('xds');
  const delta = row(xds, (r) => r.key === 'delta' || (r.key === undefined && r.label.includes('Delta')));
  out.push({
    what: '5,000 istiod-shaped services (Delta ADS)', scenario: 'xds',
    skua: delta ? `apply ${f(delta.metrics.applyMs, 0)} ms, RSS ${f(delta.metrics.rssMb, 0)} MB (+${f(delta.metrics.rssGrowthMb, 0)} over a bare proxy)` : '–',
    anchor: 'Envoy ~15–40 KB per cluster', goal: '< 1 s, < 150 MB total', status: status(delta ? delta.metrics.applyMs < 1000 && delta.metrics.rssMb < 150 : undefined),
  });
  // Older results have no proxy-only time (only end-to-end with the debounce): not judged.
  const atProxy = delta?.metrics.changeAtProxyMs;
  out.push({
    what: 'one endpoint change (Delta)', scenario: 'xds',
    skua: delta ? `${atProxy === undefined ? '' : `${f(atProxy, 2)} ms at the proxy (push arriving → first response from the new backend); `}${f(delta.metrics.changeMs, 1)} ms end to end incl. the control plane's ${xds?.settings.debounceMs ?? 100} ms debounce` : '–',
    anchor: '—', goal: '< 5 ms at the proxy', status: status(atProxy === undefined ? undefined : atProxy < 5),
  });

  const mtls = by('mtls');
  const [plain, reuse] = [row(mtls, (r, i) => r.key === 'plain' || (r.key === undefined && i === 0)), row(mtls, (r, i) => r.key === 'mtls' || (r.key === undefined && i === 1))];
  const mtlsRatio = plain && reuse ? reuse.metrics.rps / plain.metrics.rps : undefined;
  out.push({
    what: 'mTLS pair with reuse', scenario: 'mtls', skua: reuse ? `${f(reuse.metrics.rps, 0)} req/s = ${f(mtlsRatio, 2)}× plaintext` : '–',
    anchor: plain ? `plaintext pair ${f(plain.metrics.rps, 0)} req/s` : '–', goal: '≥ 0.9× plaintext', status: status(mtlsRatio === undefined ? undefined : mtlsRatio >= 0.9),
  });
  return out;
}

export function goalsText(rows: readonly GoalRow[]): string {
  return rows.map((r) => `${r.status.padEnd(12)} ${r.what}: ${r.skua} | anchor: ${r.anchor} | goal: ${r.goal}`).join('\n');
}
