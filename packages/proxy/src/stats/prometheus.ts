import { HISTOGRAM_BOUNDS, Histogram, statBase, type StatsStore, type StatTags, type Counter, type Gauge } from './store.ts';

/**
 * Envoy's Prometheus exposition: `envoy_` + the stat name with its tag values
 * pulled out (Envoy's default tag extractors), e.g.
 * `cluster.backend.upstream_rq_2xx` → `envoy_cluster_upstream_rq_xx{envoy_response_code_class="2",envoy_cluster_name="backend"}`.
 */
interface Extracted { name: string; tags: Array<readonly [string, string]> }

export function extractTags(stat: string, known: StatTags | undefined): Extracted {
  const tags: Array<readonly [string, string]> = known ? [...known.tags] : [];
  let rest = known ? statBase(stat, known) : stat;
  const code = /^(.*_rq_)([1-5])xx$/.exec(rest);
  if (code) { rest = `${code[1]}xx`; tags.unshift(['envoy_response_code_class', code[2]]); }
  const exact = /^(.*_rq)_([1-5]\d\d)$/.exec(rest);
  if (exact) { rest = exact[1]; tags.unshift(['envoy_response_code', exact[2]]); }
  return { name: 'envoy_' + rest.replace(/[^a-zA-Z0-9_]/g, '_'), tags };
}

function labels(tags: Array<readonly [string, string]>, extra = ''): string {
  const parts = tags.map(([k, v]) => `${k}="${v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n')}"`);
  if (extra) parts.push(extra);
  return parts.length ? `{${parts.join(',')}}` : '';
}

export function renderPrometheus(store: StatsStore): string {
  const groups = new Map<string, { type: string; lines: string[] }>();
  const add = (name: string, type: string, line: string): void => {
    let g = groups.get(name);
    if (!g) { g = { type, lines: [] }; groups.set(name, g); }
    g.lines.push(line);
  };
  store.each('counters', (stat, c, t) => { const e = extractTags(stat, t); add(e.name, 'counter', `${e.name}${labels(e.tags)} ${c.value}`); });
  store.each('gauges', (stat, g, t) => { const e = extractTags(stat, t); add(e.name, 'gauge', `${e.name}${labels(e.tags)} ${g.value}`); });
  store.each('histograms', (stat, h, t) => {
    const e = extractTags(stat, t);
    let cum = 0;
    for (let i = 0; i < HISTOGRAM_BOUNDS.length; i++) {
      cum += h.buckets[i];
      add(e.name, 'histogram', `${e.name}_bucket${labels(e.tags, `le="${HISTOGRAM_BOUNDS[i]}"`)} ${cum}`);
    }
    add(e.name, 'histogram', `${e.name}_bucket${labels(e.tags, 'le="+Inf"')} ${h.count}`);
    add(e.name, 'histogram', `${e.name}_sum${labels(e.tags)} ${h.sum}`);
    add(e.name, 'histogram', `${e.name}_count${labels(e.tags)} ${h.count}`);
  });
  for (const f of store.families.values()) {
    for (const series of f.series.values()) {
      const m = series.metric;
      const l = series.labelText;
      if (m instanceof Histogram) {
        const sep = l ? ',' : '';
        let cum = 0;
        for (let i = 0; i < HISTOGRAM_BOUNDS.length; i++) {
          cum += m.buckets[i];
          add(f.name, 'histogram', `${f.name}_bucket{${l}${sep}le="${HISTOGRAM_BOUNDS[i]}"} ${cum}`);
        }
        add(f.name, 'histogram', `${f.name}_bucket{${l}${sep}le="+Inf"} ${m.count}`);
        add(f.name, 'histogram', `${f.name}_sum{${l}} ${m.sum}`);
        add(f.name, 'histogram', `${f.name}_count{${l}} ${m.count}`);
      } else {
        add(f.name, f.kind, `${f.name}{${l}} ${(m as Counter | Gauge).value}`);
      }
    }
  }
  let out = '';
  for (const name of [...groups.keys()].sort()) {
    const g = groups.get(name)!;
    out += `# TYPE ${name} ${g.type}\n${g.lines.join('\n')}\n`;
  }
  return out;
}

/** Envoy's plain /stats text: `name: value`, sorted; histograms as P0..P100 are summarised by count and sum. */
export function renderText(store: StatsStore, filter: RegExp | undefined): string {
  const rows: string[] = [];
  store.each('counters', (k, c) => { if (!filter || filter.test(k)) rows.push(`${k}: ${c.value}`); });
  store.each('gauges', (k, g) => { if (!filter || filter.test(k)) rows.push(`${k}: ${g.value}`); });
  store.each('histograms', (k, h) => { if (!filter || filter.test(k)) rows.push(`${k}: count=${h.count} sum=${h.sum.toFixed(3)}`); });
  for (const f of store.families.values()) {
    for (const s of f.series.values()) {
      const k = f.flatName(s);
      if (filter && !filter.test(k)) continue;
      const m = s.metric;
      rows.push(m instanceof Histogram ? `${k}: count=${m.count} sum=${m.sum.toFixed(3)}` : `${k}: ${m.value}`);
    }
  }
  return rows.sort().join('\n') + '\n';
}

export function renderJson(store: StatsStore, filter: RegExp | undefined): string {
  const stats: Array<{ name: string; value: number }> = [];
  store.each('counters', (k, c) => { if (!filter || filter.test(k)) stats.push({ name: k, value: c.value }); });
  store.each('gauges', (k, g) => { if (!filter || filter.test(k)) stats.push({ name: k, value: g.value }); });
  for (const f of store.families.values()) {
    for (const s of f.series.values()) {
      const k = f.flatName(s);
      if (!(s.metric instanceof Histogram) && (!filter || filter.test(k))) stats.push({ name: k, value: s.metric.value });
    }
  }
  stats.sort((a, b) => (a.name < b.name ? -1 : 1));
  return JSON.stringify({ stats });
}
