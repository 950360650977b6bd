/** The demo's summary: checks, load (status counts, latency percentiles, split) and the proxy's stats. */
import { getFrom, HOST } from './net.ts';
import { percentile, type LoadResult } from './load.ts';

export interface CheckResult { readonly name: string; readonly ok: boolean; readonly detail: string }

export function printChecks(checks: readonly CheckResult[]): void {
  console.log('checks:');
  for (const c of checks) console.log(`  ${c.ok ? 'ok  ' : 'FAIL'}  ${c.name.padEnd(48)} ${c.detail}`);
  console.log('');
}

const ms = (v: number): string => (Number.isNaN(v) ? '-' : v < 10 ? v.toFixed(2) : v.toFixed(1)).padStart(7);

export function printLoad(r: LoadResult): void {
  const all: number[] = [];
  const rows: string[] = [];
  for (const t of r.targets) {
    const l = t.latenciesMs.sort((a, b) => a - b);
    all.push(...l);
    rows.push(`  ${t.target.label.padEnd(22)} ${String(l.length).padStart(8)} ${ms(percentile(l, 50))} ${ms(percentile(l, 90))} ${ms(percentile(l, 99))}   ${t.unexpected ? `${t.unexpected} not ${t.target.expect}` : ''}`.trimEnd());
  }
  all.sort((a, b) => a - b);
  const secs = r.elapsedMs / 1000;
  console.log(`\nsent ${r.sent} requests in ${secs.toFixed(1)} s (${Math.round(r.sent / secs)} req/s)`);
  console.log(`  ${'request'.padEnd(22)} ${'count'.padStart(8)} ${'p50 ms'.padStart(7)} ${'p90 ms'.padStart(7)} ${'p99 ms'.padStart(7)}`);
  for (const row of rows) console.log(row);
  console.log(`  ${'all'.padEnd(22)} ${String(all.length).padStart(8)} ${ms(percentile(all, 50))} ${ms(percentile(all, 90))} ${ms(percentile(all, 99))}`);
  const statuses = [...r.statuses].sort().map(([s, n]) => `${s}: ${n}`).join(', ');
  console.log(`status codes: ${statuses || 'none'}`);
  if (r.errors.size) console.log(`errors: ${[...r.errors].map(([e, n]) => `${e}: ${n}`).join(', ')}`);
}

/** The observed split against the expected shares: ok within 10 points once there are 200 samples. */
export function splitVerdict(seen: Map<string, number>, expect: Record<string, number>): { ok: boolean; line: string } {
  const total = [...seen.values()].reduce((a, b) => a + b, 0);
  if (total === 0) return { ok: false, line: 'split: no response carried the version header' };
  let ok = true;
  const parts = Object.entries(expect).map(([k, share]) => {
    const got = (seen.get(k) ?? 0) / total;
    if (total >= 200 && Math.abs(got - share) > 0.1) ok = false;
    return `${k} ${(got * 100).toFixed(1)}% (${seen.get(k) ?? 0})`;
  });
  const want = Object.entries(expect).map(([k, s]) => `${k} ${s * 100}%`).join(' / ');
  return { ok, line: `observed split: ${parts.join(' / ')} of ${total}; configured ${want}${ok ? '' : '  ← OFF'}` };
}

export async function printStats(admins: ReadonlyArray<{ name: string; port: number; host?: string }>, filter: RegExp): Promise<void> {
  for (const a of admins) {
    try {
      const r = await getFrom(a.host ?? HOST, a.port, `/stats?format=json`);
      const stats = (JSON.parse(r.body) as { stats: Array<{ name: string; value: number }> }).stats;
      const shown = stats.filter((s) => filter.test(s.name) && (s.value !== 0 || s.name.endsWith('_total')));
      console.log(`${a.name} stats (admin http://${a.host ?? HOST}:${a.port}/stats):`);
      for (const s of shown) console.log(`  ${s.name}: ${s.value}`);
    } catch (err) {
      console.log(`${a.name} stats: unavailable (${(err as Error).message})`);
    }
    console.log('');
  }
}
