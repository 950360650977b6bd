import type { Msg } from '../../../config/fields.ts';
import { ConfigError } from '../../../core/errors.ts';
import { compileAttribute, type Attr } from '../../../telemetry/istio/attributes.ts';

/** Istio's stats filter (istio-proxy `istio_stats`), the same config as an HTTP and a network filter. */
export const ISTIO_STATS_TYPE = 'type.googleapis.com/stats.PluginConfig';

/** The standard label sets, in istio-proxy's export order. */
export const PEER_TAGS = ['reporter', 'source_workload', 'source_canonical_service', 'source_canonical_revision', 'source_workload_namespace',
  'source_principal', 'source_app', 'source_version', 'source_cluster', 'destination_workload', 'destination_workload_namespace',
  'destination_principal', 'destination_app', 'destination_version', 'destination_service', 'destination_canonical_service',
  'destination_canonical_revision', 'destination_service_name', 'destination_service_namespace', 'destination_cluster'] as const;
export const HTTP_TAGS: readonly string[] = [...PEER_TAGS, 'request_protocol', 'response_code', 'grpc_response_status', 'response_flags', 'connection_security_policy'];
export const TCP_TAGS: readonly string[] = [...PEER_TAGS, 'request_protocol', 'response_flags', 'connection_security_policy'];
const ALL_TAGS = new Set(HTTP_TAGS);

export type MetricKind = 'counter' | 'gauge' | 'histogram';
/** Standard metrics by the short name configs use, with their kind and label set. */
export const STANDARD_METRICS: Readonly<Record<string, { kind: MetricKind; tcp: boolean }>> = {
  requests_total: { kind: 'counter', tcp: false },
  request_duration_milliseconds: { kind: 'histogram', tcp: false },
  request_bytes: { kind: 'histogram', tcp: false },
  response_bytes: { kind: 'histogram', tcp: false },
  request_messages_total: { kind: 'counter', tcp: false },
  response_messages_total: { kind: 'counter', tcp: false },
  tcp_connections_opened_total: { kind: 'counter', tcp: true },
  tcp_connections_closed_total: { kind: 'counter', tcp: true },
  tcp_sent_bytes_total: { kind: 'counter', tcp: true },
  tcp_received_bytes_total: { kind: 'counter', tcp: true },
};

/** One exported label: a standard value (index into the standard list) or an expression's value. */
export type LabelSource = { readonly name: string; readonly std: number } | { readonly name: string; readonly expr: number };

export interface CustomMetric {
  readonly name: string;
  readonly kind: MetricKind;
  readonly value: Attr;
  readonly labels: readonly LabelSource[];
}

export interface IstioStatsConfig {
  readonly disableHostHeaderFallback: boolean;
  /** SERVER_GATEWAY forces reporter="waypoint"; UNSPECIFIED follows the listener direction. */
  readonly serverGateway: boolean;
  readonly tcpReportingMs: number;
  /** Standard metric short name → its labels after overrides; absent = dropped. */
  readonly plans: ReadonlyMap<string, readonly LabelSource[]>;
  readonly custom: readonly CustomMetric[];
  /** Expressions evaluated once per request / connection, referenced by LabelSource.expr. */
  readonly exprs: readonly Attr[];
}

const KNOWN = ['@type', 'disable_host_header_fallback', 'tcp_reporting_duration', 'metrics', 'definitions', 'reporter',
  'rotation_interval', 'graceful_deletion_interval', 'rescoping_duration', 'scope_grace_period_duration'];
const KINDS = ['COUNTER', 'GAUGE', 'HISTOGRAM'] as const;

export function compileIstioStats(m: Msg | undefined): IstioStatsConfig {
  const exprs: Attr[] = [];
  const exprIds = new Map<string, number>();
  const plans = new Map<string, LabelSource[]>();
  for (const [name, d] of Object.entries(STANDARD_METRICS)) plans.set(name, (d.tcp ? TCP_TAGS : HTTP_TAGS).map((t, i) => ({ name: t, std: i })));
  const result = { disableHostHeaderFallback: false, serverGateway: false, tcpReportingMs: 5000, plans, custom: [] as CustomMetric[], exprs };
  if (!m) return result;
  m.onlyFields(KNOWN);
  result.disableHostHeaderFallback = m.bool('disable_host_header_fallback');
  result.serverGateway = m.enumOf('reporter', ['UNSPECIFIED', 'SERVER_GATEWAY'] as const) === 'SERVER_GATEWAY';
  result.tcpReportingMs = m.durationMs('tcp_reporting_duration', 5000);
  // Scope rotation bounds memory in istio-proxy; our series never expire, so a rotation request is refused.
  for (const f of ['rotation_interval', 'rescoping_duration']) if (m.has(f) && m.durationMs(f, 0) > 0) throw m.error(f, 'stats scope rotation is not supported');

  const expr = (owner: Msg, key: string, text: string, numeric = false): number => {
    const k = `${numeric ? 'n' : 's'}:${text}`;
    let id = exprIds.get(k);
    if (id === undefined) { id = exprs.length; exprs.push(compileAttribute(owner, key, text, numeric)); exprIds.set(k, id); }
    return id;
  };

  const custom: Array<{ name: string; kind: MetricKind; value: Attr; labels: LabelSource[] }> = [];
  for (const d of m.list('definitions')) {
    d.onlyFields(['name', 'value', 'type']);
    const name = d.requiredStr('name');
    if (STANDARD_METRICS[name]) throw d.error('name', `${name} is a standard metric and cannot be redefined`);
    if (!/^[a-zA-Z_][a-zA-Z0-9_]*$/.test(name)) throw d.error('name', 'must be a valid metric name');
    custom.push({ name: `istio_${name}`, kind: d.enumOf('type', KINDS).toLowerCase() as MetricKind, value: exprs[expr(d, 'value', d.requiredStr('value'), true)], labels: [] });
  }
  const customByName = new Map(custom.map((c) => [c.name.slice('istio_'.length), c]));

  for (const mc of m.list('metrics')) {
    mc.onlyFields(['name', 'dimensions', 'tags_to_remove', 'drop', 'match']);
    if (mc.str('match')) throw mc.error('match', 'is not implemented (istio-proxy ignores it too); remove it');
    const name = mc.str('name');
    if (name && !STANDARD_METRICS[name] && !customByName.has(name)) throw mc.error('name', `unknown metric ${name}`);
    const targets = name ? (STANDARD_METRICS[name] ? [name] : []) : Object.keys(STANDARD_METRICS);
    const customTargets = name ? (customByName.has(name) ? [customByName.get(name)!] : []) : custom;
    if (mc.bool('drop')) { for (const t of targets) plans.delete(t); continue; }
    mc.strList('tags_to_remove').forEach((tag, i) => {
      if (!ALL_TAGS.has(tag)) throw new ConfigError(`${mc.field('tags_to_remove')}[${i}]`, `${tag} is not a standard label`);
      for (const t of targets) { const p = plans.get(t); if (p) plans.set(t, p.filter((l) => l.name !== tag)); }
    });
    const dims = mc.msg('dimensions');
    if (!dims) continue;
    for (const tag of Object.keys(dims.raw).sort()) {
      const text = dims.str(tag);
      const id = expr(dims, tag, text);
      for (const t of targets) {
        const p = plans.get(t);
        if (!p) continue;
        const at = p.findIndex((l) => l.name === tag);
        if (at >= 0) p[at] = { name: tag, expr: id };
        else if (!ALL_TAGS.has(tag)) p.push({ name: tag, expr: id });
      }
      for (const c of customTargets) c.labels.push({ name: tag, expr: id });
    }
  }
  result.custom = custom;
  return result;
}
