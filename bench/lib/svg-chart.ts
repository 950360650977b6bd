/**
 * Horizontal grouped bar charts as plain SVG text (no script, no fonts to fetch), for the HTML report
 * and the README's chart. One group per target (colored by target), one bar per series (e.g. p50/p90/p99,
 * shaded lighter in turn), the value written at the end of each bar.
 */

export interface ChartGroup {
  label: string;
  /** Picks the color: skua, nginx, haproxy, direct. */
  target: string;
  values: ReadonlyArray<number | undefined>;
}

export interface ChartSpec {
  title: string;
  /** Written after each value ("ms", "MB"). */
  unit: string;
  series: readonly string[];
  groups: readonly ChartGroup[];
  digits?: number;
  /** Shown under the title: which way is better, the goal. */
  note?: string;
}

export interface Svg { text: string; width: number; height: number }

const COLORS: Record<string, string> = { skua: '#d9622b', nginx: '#2f8a57', haproxy: '#3a6db5', direct: '#8a8a8a' };
const SHADES = [1, 0.62, 0.36, 0.2];
const FONT = 'font-family="system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif"';
const LABEL_W = 215;
const VALUE_W = 86;
const BAR_H = 13;
const GROUP_GAP = 9;

export function escapeXml(s: string): string {
  return s.replaceAll('&', '&amp;').replaceAll('<', '&lt;').replaceAll('>', '&gt;').replaceAll('"', '&quot;');
}

function fmt(v: number, digits: number): string {
  return v.toLocaleString('en-US', { minimumFractionDigits: digits, maximumFractionDigits: digits });
}

function colorOf(target: string): string {
  return COLORS[target] ?? '#666';
}

/** The chart as an <svg> element `width` wide. */
export function barChart(spec: ChartSpec, width = 520): Svg {
  const digits = spec.digits ?? 1;
  const max = Math.max(0, ...spec.groups.flatMap((g) => g.values.filter((v): v is number => v !== undefined && Number.isFinite(v))));
  const plotW = width - LABEL_W - VALUE_W;
  const legend = spec.series.length > 1;
  let y = 22 + (spec.note ? 15 : 0) + (legend ? 18 : 4);
  const parts: string[] = [`<text x="0" y="15" font-size="13" font-weight="600" ${FONT}>${escapeXml(spec.title)}</text>`];
  if (spec.note) parts.push(`<text x="0" y="30" font-size="11" fill="#555" ${FONT}>${escapeXml(spec.note)}</text>`);
  if (legend) {
    const ly = y - 8;
    spec.series.forEach((s, i) => {
      const x = LABEL_W + i * 80;
      parts.push(`<rect x="${x}" y="${ly - 9}" width="10" height="10" fill="#555" fill-opacity="${SHADES[i % SHADES.length]}"/>`,
        `<text x="${x + 14}" y="${ly}" font-size="11" ${FONT}>${escapeXml(s)}</text>`);
    });
  }
  for (const g of spec.groups) {
    const h = spec.series.length * BAR_H;
    parts.push(`<text x="${LABEL_W - 8}" y="${y + h / 2 + 4}" font-size="12" text-anchor="end" ${FONT}>${escapeXml(g.label)}</text>`);
    g.values.forEach((v, i) => {
      const by = y + i * BAR_H;
      if (v === undefined || !Number.isFinite(v)) {
        parts.push(`<text x="${LABEL_W + 4}" y="${by + BAR_H - 3}" font-size="10" fill="#999" ${FONT}>n/a</text>`);
        return;
      }
      const w = max > 0 ? Math.max(1, (v / max) * plotW) : 1;
      parts.push(`<rect x="${LABEL_W}" y="${by + 1}" width="${w.toFixed(1)}" height="${BAR_H - 2}" fill="${colorOf(g.target)}" fill-opacity="${SHADES[i % SHADES.length]}"><title>${escapeXml(`${g.label} ${spec.series[i] ?? ''}: ${fmt(v, digits)} ${spec.unit}`)}</title></rect>`,
        `<text x="${LABEL_W + w + 4}" y="${by + BAR_H - 3}" font-size="10.5" ${FONT}>${fmt(v, digits)}${spec.unit ? ` ${escapeXml(spec.unit)}` : ''}</text>`);
    });
    y += h + GROUP_GAP;
  }
  const height = y + 2;
  return { width, height, text: `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>` };
}

/** Several charts in one SVG, `columns` side by side, with a heading and a foot line. */
export function chartGrid(title: string, foot: string, charts: readonly Svg[], columns = 2, gap = 28): Svg {
  const colW = Math.max(...charts.map((c) => c.width));
  const width = columns * colW + (columns - 1) * gap + 24;
  const parts: string[] = [`<rect width="100%" height="100%" fill="#fff"/>`, `<text x="12" y="22" font-size="15" font-weight="700" ${FONT}>${escapeXml(title)}</text>`];
  let y = 38;
  for (let i = 0; i < charts.length; i += columns) {
    const row = charts.slice(i, i + columns);
    row.forEach((c, j) => parts.push(`<svg x="${12 + j * (colW + gap)}" y="${y}" width="${c.width}" height="${c.height}">${c.text.replace(/^<svg[^>]*>|<\/svg>$/g, '')}</svg>`));
    y += Math.max(...row.map((c) => c.height)) + 14;
  }
  parts.push(`<text x="12" y="${y + 6}" font-size="10.5" fill="#555" ${FONT}>${escapeXml(foot)}</text>`);
  const height = y + 16;
  return { width, height, text: `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" viewBox="0 0 ${width} ${height}">${parts.join('')}</svg>\n` };
}
