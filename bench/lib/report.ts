/**
 * Result tables (terminal + Markdown), ratios to nginx and haproxy, the
 * issue's acceptance checks, and the files under bench/results/.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { Acceptance, CheckOutcome, Column, Row, ScenarioResult, TargetName } from './types.ts';

export const ACCEPTANCE: Acceptance[] = [
  { scenario: 'l7', name: 'L7 HTTP/1.1 req/s: skua >= 0.6x nginx', target: 'skua', baseline: 'nginx', min: 0.6 },
  { scenario: 'l4', name: 'L4 TCP Gb/s: skua >= 0.9x haproxy (tcp mode)', target: 'skua', baseline: 'haproxy', min: 0.9 },
];

const RATIO_BASES: TargetName[] = ['nginx', 'haproxy'];

function findRow(res: ScenarioResult, target: TargetName): Row | undefined {
  return res.rows.find((r) => r.target === target);
}

function fmt(v: number | undefined, digits: number): string {
  if (v === undefined || !Number.isFinite(v)) return '–';
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

/** `row.primary / base.primary`, or undefined when either side has no number. */
export function ratio(res: ScenarioResult, row: Row, base: TargetName): number | undefined {
  const b = findRow(res, base);
  const num = row.metrics[res.primary];
  const den = b?.metrics[res.primary];
  if (num === undefined || den === undefined || den === 0) return undefined;
  return num / den;
}

function firstLine(s: string): string {
  return s.split('\n')[0].slice(0, 120);
}

/** Header + body cells for one scenario: label, metrics, ×nginx, ×haproxy. */
function cells(res: ScenarioResult): { head: string[]; body: string[][] } {
  const head = ['target', ...res.columns.map((c: Column) => c.title), ...RATIO_BASES.map((b) => `x ${b}`)];
  const body = res.rows.map((row) => {
    if (row.error) {
      return [row.label, `FAILED: ${firstLine(row.error)}`, ...Array<string>(head.length - 2).fill('')];
    }
    return [
      row.label,
      ...res.columns.map((c) => fmt(row.metrics[c.key], c.digits)),
      ...RATIO_BASES.map((b) => fmt(ratio(res, row, b), 2)),
    ];
  });
  return { head, body };
}

export function textTable(res: ScenarioResult): string {
  const { head, body } = cells(res);
  const ok = body.filter((r, i) => !res.rows[i].error);
  const widths = head.map((h, i) => Math.max(h.length, ...(i === 0 ? body : ok).map((r) => r[i].length)));
  const line = (r: string[]): string => r.map((c, i) => (i === 0 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join('  ');
  const out = [line(head), widths.map((w) => '-'.repeat(w)).join('  ')];
  body.forEach((r, i) => out.push(res.rows[i].error ? `${r[0].padEnd(widths[0])}  ${r[1]}` : line(r)));
  return out.join('\n');
}

export function markdownTable(res: ScenarioResult): string {
  const { head, body } = cells(res);
  const out = [`| ${head.join(' | ')} |`, `|${head.map((_, i) => (i === 0 ? '---' : '---:')).join('|')}|`];
  for (const r of body) out.push(`| ${r.map((c) => c.replaceAll('|', '\\|')).join(' | ')} |`);
  return out.join('\n');
}

export function checkAcceptance(results: ScenarioResult[]): CheckOutcome[] {
  const out: CheckOutcome[] = [];
  for (const a of ACCEPTANCE) {
    const res = results.find((r) => r.scenario === a.scenario);
    if (!res) continue;
    const row = findRow(res, a.target);
    const base = findRow(res, a.baseline);
    const skip = (detail: string): CheckOutcome => ({ name: a.name, status: 'SKIP', min: a.min, detail });
    const fail = (detail: string, r?: number): CheckOutcome => ({ name: a.name, status: 'FAIL', min: a.min, ratio: r, detail });
    if (!row || !base) { out.push(skip(`${!row ? a.target : a.baseline} not among --targets`)); continue; }
    if (row.error) { out.push(fail(`${a.target} failed: ${firstLine(row.error)}`)); continue; }
    if (base.error) { out.push(fail(`${a.baseline} failed: ${firstLine(base.error)}`)); continue; }
    const r = ratio(res, row, a.baseline);
    if (r === undefined) { out.push(fail('no ratio')); continue; }
    const errs = row.metrics.errors ?? 0;
    if (errs > 0) { out.push(fail(`ratio ${r.toFixed(2)} but ${errs} errors during the run`, r)); continue; }
    out.push({ name: a.name, status: r >= a.min ? 'PASS' : 'FAIL', ratio: r, min: a.min, detail: `ratio ${r.toFixed(2)}` });
  }
  return out;
}

export function checkLine(c: CheckOutcome): string {
  return `${c.status.padEnd(4)}  ${c.name}  (${c.detail}, ${c.need ?? `need >= ${c.min}`})`;
}

export function fileStamp(d: Date): string {
  return d.toISOString().replace(/\.\d+Z$/, 'Z').replaceAll(':', '-');
}

export function writeJsonFile(file: string, value: unknown): string {
  mkdirSync(path.dirname(file), { recursive: true });
  writeFileSync(file, `${JSON.stringify(value, null, 2)}\n`);
  return file;
}

/** `tag` (e.g. `refs` for a --ref comparison) keeps the file out of the report's newest-per-scenario set. */
export function writeJson(dir: string, res: ScenarioResult, env: Record<string, string>, checks: CheckOutcome[], tag = ''): string {
  const file = path.join(dir, `${res.scenario}${tag ? `-${tag}` : ''}-${fileStamp(new Date(res.startedAt))}.json`);
  const mine = checks.filter((c) => ACCEPTANCE.some((a) => a.name === c.name && a.scenario === res.scenario) || c.name.startsWith(`${res.scenario} `));
  return writeJsonFile(file, { ...res, env, acceptance: mine });
}

export function writeMarkdown(
  dir: string, results: ScenarioResult[], env: Record<string, string>, checks: CheckOutcome[], extra: string[],
): string {
  mkdirSync(dir, { recursive: true });
  const out = ['# Skua benchmarks (latest run)', ''];
  out.push(...Object.entries(env).map(([k, v]) => `- ${k}: ${v}`), '');
  for (const res of results) {
    out.push(`## ${res.scenario}: ${res.title}`, '', markdownTable(res), '');
    out.push(...Object.entries(res.settings).map(([k, v]) => `- ${k}: ${v}`), '');
  }
  if (checks.length) {
    out.push('## Acceptance', '', ...checks.map((c) => `- **${c.status}** ${c.name} (${c.detail})`), '');
  }
  out.push(...extra);
  const file = path.join(dir, 'latest.md');
  writeFileSync(file, `${out.join('\n').trimEnd()}\n`);
  return file;
}
