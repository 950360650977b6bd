import { Counter, Gauge, Histogram, type StatsStore } from './store.ts';

/**
 * Metrics with free-form labels (Istio's istio_* metrics): a family per metric name, a series per
 * distinct label set. Callers resolve a series once (on a cache miss) and then bump its plain
 * Counter/Histogram; the Prometheus label text is formatted when the series is created, never
 * per scrape line or per request.
 */
export type FamilyKind = 'counter' | 'gauge' | 'histogram';
type MetricOf<K extends FamilyKind> = K extends 'counter' ? Counter : K extends 'gauge' ? Gauge : Histogram;

export interface LabelledSeries {
  readonly names: readonly string[];
  readonly values: readonly string[];
  /** `a="x",b="y"`: the escaped Prometheus label list without braces. */
  readonly labelText: string;
  readonly metric: Counter | Gauge | Histogram;
}

export class LabelledFamily<K extends FamilyKind = FamilyKind> {
  /** The exported (Prometheus) name, e.g. `istio_requests_total`. */
  readonly name: string;
  /** Envoy's custom stat namespace the name lives in (`istiocustom`): text/JSON stats show `<ns>.<name>.<tag>.<value>...`. */
  readonly namespace: string;
  readonly kind: K;
  readonly series = new Map<string, LabelledSeries>();

  constructor(namespace: string, name: string, kind: K) {
    this.namespace = namespace;
    this.name = name;
    this.kind = kind;
  }

  /** The series for these labels (names and values in export order), made on first use. */
  get(names: readonly string[], values: readonly string[]): MetricOf<K> {
    let text = '';
    for (let i = 0; i < names.length; i++) text += `${i ? ',' : ''}${sanitizeName(names[i])}="${escapeValue(values[i])}"`;
    let s = this.series.get(text);
    if (!s) {
      const metric = this.kind === 'counter' ? new Counter() : this.kind === 'gauge' ? new Gauge() : new Histogram();
      s = { names: [...names], values: [...values], labelText: text, metric };
      this.series.set(text, s);
    }
    return s.metric as MetricOf<K>;
  }

  /** Envoy's flat stat name for a series: `<ns>.<name>.<tag>.<value>...`. */
  flatName(s: LabelledSeries): string {
    let out = `${this.namespace}.${this.name}`;
    for (let i = 0; i < s.names.length; i++) out += `.${s.names[i]}.${s.values[i]}`;
    return out;
  }
}

/** The family `name` of `kind` in `store`, shared by every filter that reports it. */
export function labelledFamily<K extends FamilyKind>(store: StatsStore, namespace: string, name: string, kind: K): LabelledFamily<K> {
  const existing = store.families.get(name) as LabelledFamily | undefined;
  if (existing) {
    if (existing.kind !== kind) throw new Error(`stat family ${name} is a ${existing.kind}, not a ${kind}`);
    return existing as LabelledFamily<K>;
  }
  const f = new LabelledFamily(namespace, name, kind);
  store.families.set(name, f);
  return f;
}

/** Prometheus label names: [a-zA-Z_][a-zA-Z0-9_]* (Envoy replaces other characters with '_'). */
export function sanitizeName(n: string): string {
  const s = n.replace(/[^a-zA-Z0-9_]/g, '_');
  return /^[0-9]/.test(s) ? `_${s}` : s;
}

export function escapeValue(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
