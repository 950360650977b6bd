/**
 * bench/results/report.html: one self-contained page (inline SVG, inline CSS, no script) with the
 * newest result of every scenario under bench/results — issue 13's table, then per scenario its
 * charts (req/s, latency percentiles, CPU, RSS, side by side with nginx/haproxy), its table, the
 * commit, the load average and the settings. bench/results/summary.svg: the README's chart.
 */
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { barChart, chartGrid, escapeXml, type ChartSpec, type Svg } from './svg-chart.ts';
import { issueGoals, type StoredResult } from './issue-goals.ts';
import { markdownTable } from './report.ts';
import { ALL_SCENARIOS, type Row, type Scenario } from './types.ts';
import type { MicroResult } from '../scenarios/micro.ts';

interface Spec { title: string; unit: string; keys: string[]; series?: string[]; digits?: number; note?: string }

const LAT = { keys: ['p50', 'p90', 'p99'], series: ['p50', 'p90', 'p99'], unit: 'ms', digits: 2, note: 'lower is better' };
const SPECS: Partial<Record<Scenario, Spec[]>> = {
  idle: [{ title: 'Memory at idle', unit: 'MB', keys: ['rssMb', 'anonMb'], series: ['VmRSS', 'RssAnon'], note: 'lower is better; RssAnon is what the process allocated itself' }],
  l7: [
    { title: 'HTTP/1.1 proxy throughput', unit: 'req/s', keys: ['rps'], digits: 0, note: 'higher is better' },
    { title: 'Latency under wrk load', ...LAT },
    { title: 'Proxy CPU per request', unit: 'µs', keys: ['cpuUsPerReq'], note: 'utime+stime per request, lower is better' },
    { title: 'Proxy RSS after the run', unit: 'MB', keys: ['rssMb'], note: 'lower is better' },
  ],
  l4: [{ title: 'TCP proxy, one stream (median)', unit: 'Gb/s', keys: ['gbps'], digits: 2, note: 'higher is better' }],
  'sidecar-pair': [
    { title: 'Latency the pair adds to direct', unit: 'ms', keys: ['addedP50', 'addedP90', 'addedP99'], series: ['+p50', '+p90', '+p99'], digits: 2, note: 'fortio 1,000 req/s, 16 connections, 1 KB; lower is better' },
    { title: 'CPU of the two proxies per 1,000 req/s', unit: 'vCPU', keys: ['vcpuPer1k'], digits: 3, note: 'lower is better' },
    { title: 'RSS of each proxy', unit: 'MB', keys: ['clientRssMb', 'serverRssMb'], series: ['client side', 'server side'], note: 'lower is better' },
  ],
  mtls: [{ title: 'Sidecar pair throughput', unit: 'req/s', keys: ['rps'], digits: 0, note: 'higher is better' }, { title: 'Latency', ...LAT, keys: ['p50', 'p99'], series: ['p50', 'p99'] }],
  routes: [{ title: 'Throughput', unit: 'req/s', keys: ['rps'], digits: 0 }, { title: 'CPU per request', unit: 'µs', keys: ['cpuUsPerReq'], digits: 2 }, { title: 'RSS', unit: 'MB', keys: ['rssMb'] }],
  xds: [{ title: 'Apply 5,000 services', unit: 'ms', keys: ['applyMs'], digits: 0 }, { title: 'RSS after applying', unit: 'MB', keys: ['rssMb'] }],
  'xds-scale': [{ title: 'Push', unit: 's', keys: ['pushS'] }, { title: 'Longest stall of the probe', unit: 'ms', keys: ['maxBlockMs'], digits: 0 }, { title: 'RSS', unit: 'MB', keys: ['rssPushMb', 'rssShrunkMb'], series: ['after push', 'after shrink'], digits: 0 }],
};

function chartOf(res: StoredResult, s: Spec, width?: number, rows?: readonly Row[]): Svg | undefined {
  const groups = (rows ?? res.rows).filter((r) => !r.error)
    .map((r) => ({ label: r.label, target: r.target, values: s.keys.map((k) => r.metrics[k]) }))
    .filter((g) => g.values.some((v) => v !== undefined));
  if (groups.length === 0) return undefined;
  const spec: ChartSpec = { title: s.title, unit: s.unit, series: s.series ?? s.keys, groups, digits: s.digits, note: s.note };
  return barChart(spec, width);
}

function specsFor(res: StoredResult): Spec[] {
  const specs = SPECS[res.scenario];
  if (specs) return specs;
  const col = res.columns.find((c) => c.key === res.primary);
  return col ? [{ title: col.title, unit: '', keys: [col.key], digits: col.digits }] : [];
}

const FILE_RE = /^(.+)-(\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ)\.json$/;

/** The newest JSON per scenario under `dir` (file names are <scenario>-<UTC stamp>.json). */
export function latestResults(dir: string): { results: StoredResult[]; micro?: MicroResult & { env?: Record<string, string> } } {
  const newest = new Map<string, string>();
  for (const f of readdirSync(dir).sort()) {
    const m = FILE_RE.exec(f);
    if (m && (ALL_SCENARIOS as readonly string[]).includes(m[1])) newest.set(m[1], f);
  }
  const read = (f: string): unknown => JSON.parse(readFileSync(path.join(dir, f), 'utf8'));
  const results = ALL_SCENARIOS.filter((s) => s !== 'micro' && newest.has(s)).map((s) => read(newest.get(s)!) as StoredResult);
  const microFile = newest.get('micro');
  return { results, micro: microFile ? read(microFile) as MicroResult & { env?: Record<string, string> } : undefined };
}

const CSS = `body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:24px auto;max-width:1180px;padding:0 16px;color:#222}
h1{font-size:22px}h2{font-size:18px;margin-top:36px;border-bottom:1px solid #ddd;padding-bottom:4px}
table{border-collapse:collapse;margin:10px 0;font-size:12.5px}td,th{border:1px solid #ddd;padding:3px 7px;text-align:right}
td:first-child,th:first-child{text-align:left}.meta{color:#555;font-size:12.5px}.charts{display:flex;flex-wrap:wrap;gap:18px 36px;margin:12px 0}
.reached{color:#1d7a3e;font-weight:600}.not{color:#b3261e;font-weight:600}.nm{color:#888}details{margin:6px 0;font-size:12.5px}pre{white-space:pre-wrap}`;

function htmlTable(md: string): string {
  const lines = md.split('\n').filter((l) => l.startsWith('|'));
  const cells = (l: string): string[] => l.slice(1, -1).split(/(?<!\\)\|/).map((c) => escapeXml(c.trim().replaceAll('\\|', '|')));
  const [head, , ...body] = lines;
  return `<table><tr>${cells(head).map((c) => `<th>${c}</th>`).join('')}</tr>${body.map((l) => `<tr>${cells(l).map((c) => `<td>${c}</td>`).join('')}</tr>`).join('')}</table>`;
}

function meta(res: { startedAt: string; seconds: number; env?: Record<string, string>; load?: { start: string; end: string } }): string {
  const env = res.env ?? {};
  const load = res.load ? `load average ${res.load.start.split(' ').slice(0, 3).join(' ')} → ${res.load.end.split(' ').slice(0, 3).join(' ')}` : `load average at the run's start ${env.loadavg ?? 'not recorded'}`;
  return `<p class="meta">${escapeXml(res.startedAt)} · ${res.seconds.toFixed(0)} s · commit ${escapeXml(env.commit ?? 'not recorded')} · ${escapeXml(load)} · ${escapeXml(env.cpu ?? '')} · Node ${escapeXml(env.node ?? '')}</p>`;
}

function scenarioSection(res: StoredResult): string {
  const charts = specsFor(res).map((s) => chartOf(res, s)).filter((c): c is Svg => c !== undefined);
  const errors = res.rows.filter((r) => r.error).map((r) => `<details><summary>${escapeXml(r.label)} failed</summary><pre>${escapeXml(r.error ?? '')}</pre></details>`);
  const settings = Object.entries(res.settings).map(([k, v]) => `<li><b>${escapeXml(k)}</b>: ${escapeXml(String(v))}</li>`).join('');
  return `<h2 id="${res.scenario}">${escapeXml(res.scenario)}: ${escapeXml(res.title)}</h2>${meta(res)}
<div class="charts">${charts.map((c) => c.text).join('\n')}</div>${htmlTable(markdownTable(res))}${errors.join('')}
<details><summary>settings</summary><ul>${settings}</ul></details>`;
}

function microSection(m: MicroResult & { env?: Record<string, string> }): string {
  const rows = m.rows.map((r) => `<tr><td>${escapeXml(r.file)}</td><td>${escapeXml(r.task)}</td><td>${r.error ? escapeXml(`FAILED: ${r.error}`) : Math.round(r.opsPerSec ?? 0).toLocaleString('en-US')}</td><td>${r.meanNs?.toFixed(1) ?? ''}</td><td>${r.rmePct?.toFixed(2) ?? ''}</td></tr>`);
  return `<h2 id="micro">micro: tinybench</h2>${meta(m)}<table><tr><th>file</th><th>task</th><th>ops/s</th><th>mean ns</th><th>±%</th></tr>${rows.join('')}</table>`;
}

export function renderReport(results: readonly StoredResult[], micro?: MicroResult & { env?: Record<string, string> }): string {
  const goals = issueGoals(results).map((g) => `<tr><td>${escapeXml(g.what)}</td><td>${escapeXml(g.skua)}</td><td>${escapeXml(g.anchor)}</td><td>${escapeXml(g.goal)}</td><td class="${g.status === 'reached' ? 'reached' : g.status === 'not reached' ? 'not' : 'nm'}">${g.status}</td></tr>`);
  const toc = results.map((r) => `<a href="#${r.scenario}">${r.scenario}</a>`).concat(micro ? ['<a href="#micro">micro</a>'] : []).join(' · ');
  return `<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Skua benchmarks</title><style>${CSS}</style></head><body>
<h1>Skua benchmarks</h1><p class="meta">The newest result of each scenario under bench/results (<code>./dev bench</code>), one worker per proxy, loopback, side by side in one run per scenario.
The machine is shared: each section gives the load average while it ran; latency moves with it far more than CPU time per request does.</p><p>${toc}</p>
<h2>Issue 13: a sidecar people can afford in every pod</h2><table><tr><th>what</th><th>skua</th><th>anchor (same run)</th><th>goal</th><th>status</th></tr>${goals.join('')}</table>
${results.map(scenarioSection).join('\n')}${micro ? microSection(micro) : ''}</body></html>\n`;
}

/** The README's chart: L7 req/s and CPU, the sidecar pair's CPU and RSS, idle memory. */
export function summarySvg(results: readonly StoredResult[]): Svg | undefined {
  const by = (s: Scenario): StoredResult | undefined => results.find((r) => r.scenario === s);
  const charts: Svg[] = [];
  const add = (res: StoredResult | undefined, i: number, rows?: (r: Row) => boolean): void => {
    const spec = res && SPECS[res.scenario]?.[i];
    const c = res && spec ? chartOf(res, spec, 470, rows ? res.rows.filter(rows) : undefined) : undefined;
    if (c) charts.push(c);
  };
  const pair = by('sidecar-pair');
  const proxies = (r: Row): boolean => r.target !== 'direct';
  add(by('l7'), 0); add(by('l7'), 2); add(pair, 1, proxies); add(pair, 2, proxies); add(pair, 0, proxies); add(by('idle'), 0);
  if (charts.length === 0) return undefined;
  const used = [by('l7'), pair, by('idle')].filter((r): r is StoredResult => r !== undefined);
  const commits = [...new Set(used.map((r) => r.env?.commit ?? '?'))].join(', ');
  const loads = used.map((r) => `${r.scenario} ${(r.load?.start ?? r.env?.loadavg ?? '?').split(' ')[0]}`).join(', ');
  return chartGrid('skua-proxy beside nginx and haproxy (one worker each, loopback)', `${used[0]?.startedAt.slice(0, 10) ?? ''} · commit ${commits} · 1-min load average at start: ${loads} (2 shared cores) · ./dev bench`, charts);
}

export function writeReports(dir: string): string[] {
  const { results, micro } = latestResults(dir);
  const html = path.join(dir, 'report.html');
  writeFileSync(html, renderReport(results, micro));
  const svg = summarySvg(results);
  if (!svg) return [html];
  const svgFile = path.join(dir, 'summary.svg');
  writeFileSync(svgFile, svg.text);
  return [html, svgFile];
}
