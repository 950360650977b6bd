import type { ProxyServer } from '../server.ts';
import type { CircuitBreakerLimits } from '../upstream/cluster-config.ts';
import type { Host } from '../upstream/host.ts';

/**
 * A host's counters, in this order. With --concurrency N each thread holds its own; Envoy's are the
 * process's, so /clusters adds the other threads' (`others`, keyed `cluster\nhost:port`) to these.
 */
const HOST_COUNTERS = ['cx_active', 'cx_connect_fail', 'cx_total', 'rq_active', 'rq_error', 'rq_success', 'rq_timeout', 'rq_total'] as const;
type HostCounter = (typeof HOST_COUNTERS)[number];

/** Other threads' host counters by `cluster\nhost:port`. */
export type HostCounts = ReadonlyMap<string, readonly number[]>;

function ownCounts(h: Host): number[] {
  return [h.cxActive, h.cxConnectFail, h.cxTotal, h.activeRequests, h.rqError, h.rqSuccess, h.rqTimeout, h.rqTotal];
}

/** This thread's host counters, for the main thread to add up (a worker's reply). */
export function hostCounts(s: ProxyServer): Array<[string, number[]]> {
  const out: Array<[string, number[]]> = [];
  for (const c of s.clusters.all()) for (const h of c.hostSet.hosts) out.push([`${c.config.name}\n${h.hostPort}`, ownCounts(h)]);
  return out;
}

/** Adds `b` into `into`, counter by counter. */
export function addCounts(into: Map<string, number[]>, b: ReadonlyArray<readonly [string, readonly number[]]>): void {
  for (const [k, v] of b) {
    const a = into.get(k);
    if (a) for (let i = 0; i < a.length; i++) a[i] += v[i]; else into.set(k, [...v]);
  }
}

function counters(cluster: string, h: Host, others: HostCounts | undefined): Record<HostCounter, number> {
  const own = ownCounts(h);
  const more = others?.get(`${cluster}\n${h.hostPort}`);
  const r = {} as Record<HostCounter, number>;
  HOST_COUNTERS.forEach((name, i) => { r[name] = own[i] + (more?.[i] ?? 0); });
  return r;
}

/** Envoy's health_flags text: `healthy`, or each failing flag prefixed with `/`. */
function healthFlags(h: Host): string {
  let f = '';
  if (h.ejected) f += '/failed_outlier_check';
  if (!h.edsHealthy) f += '/failed_eds_health';
  return f || 'healthy';
}

/** %g-like: integers plain, others as JavaScript prints them. */
const num = (v: number): string => String(v);

function limitsText(lines: string[], n: string, priority: string, l: CircuitBreakerLimits): void {
  lines.push(`${n}::${priority}_priority::max_connections::${l.maxConnections}`);
  lines.push(`${n}::${priority}_priority::max_pending_requests::${l.maxPendingRequests}`);
  lines.push(`${n}::${priority}_priority::max_requests::${l.maxRequests}`);
  lines.push(`${n}::${priority}_priority::max_retries::${l.maxRetries}`);
}

/** Envoy's /clusters text: `<cluster>::<key>::<value>` and per-host `<cluster>::<ip:port>::<stat>::<value>`. */
export function clustersText(s: ProxyServer, others?: HostCounts): string {
  const lines: string[] = [];
  for (const c of s.clusters.all()) {
    const n = c.config.name;
    lines.push(`${n}::observability_name::${n}`);
    const od = c.outlier;
    od?.sync();
    if (od) {
      lines.push(`${n}::outlier::success_rate_average::${num(od.externalNumbers.average)}`);
      lines.push(`${n}::outlier::success_rate_ejection_threshold::${num(od.externalNumbers.threshold)}`);
      lines.push(`${n}::outlier::local_origin_success_rate_average::${num(od.localNumbers.average)}`);
      lines.push(`${n}::outlier::local_origin_success_rate_ejection_threshold::${num(od.localNumbers.threshold)}`);
    }
    limitsText(lines, n, 'default', c.config.limits);
    limitsText(lines, n, 'high', c.config.limitsHigh);
    lines.push(`${n}::added_via_api::false`);
    for (const h of c.hostSet.hosts) {
      const p = `${n}::${h.hostPort}`;
      const v = counters(n, h, others);
      for (const name of HOST_COUNTERS) lines.push(`${p}::${name}::${v[name]}`);
      lines.push(`${p}::hostname::${h.hostname}`);
      lines.push(`${p}::health_flags::${healthFlags(h)}`);
      lines.push(`${p}::weight::${h.weight}`);
      lines.push(`${p}::zone::${h.zone}`);
      lines.push(`${p}::priority::${h.priority}`);
      lines.push(`${p}::success_rate::${num(h.outlier?.external.rate ?? -1)}`);
      lines.push(`${p}::local_origin_success_rate::${num(h.outlier?.local.rate ?? -1)}`);
    }
  }
  return lines.join('\n') + '\n';
}

/** One CircuitBreakers.Thresholds as proto JSON (the DEFAULT enum value is omitted, as Envoy prints it). */
function thresholdsJson(priority: string, l: CircuitBreakerLimits): unknown {
  return { ...(priority === 'DEFAULT' ? {} : { priority }), max_connections: l.maxConnections, max_pending_requests: l.maxPendingRequests, max_requests: l.maxRequests, max_retries: l.maxRetries };
}

/** ?format=json: envoy.admin.v3.Clusters. */
export function clustersJson(s: ProxyServer, others?: HostCounts): unknown {
  return {
    cluster_statuses: [...s.clusters.all()].map((c) => {
      const od = c.outlier;
      od?.sync();
      return {
        name: c.config.name,
        observability_name: c.config.name,
        added_via_api: false,
        ...(od && od.externalNumbers.threshold >= 0 ? { success_rate_ejection_threshold: { value: od.externalNumbers.threshold } } : {}),
        ...(od && od.localNumbers.threshold >= 0 ? { local_origin_success_rate_ejection_threshold: { value: od.localNumbers.threshold } } : {}),
        circuit_breakers: { thresholds: [thresholdsJson('DEFAULT', c.config.limits), thresholdsJson('HIGH', c.config.limitsHigh)] },
        host_statuses: c.hostSet.hosts.map((h) => {
          const sr = h.outlier?.external.rate ?? -1;
          const lsr = h.outlier?.local.rate ?? -1;
          const v = counters(c.config.name, h, others);
          return {
            address: { socket_address: { address: h.address, port_value: h.port } },
            stats: [
              { name: 'cx_connect_fail', value: String(v.cx_connect_fail) },
              { name: 'cx_total', value: String(v.cx_total) },
              { name: 'rq_error', value: String(v.rq_error) },
              { name: 'rq_success', value: String(v.rq_success) },
              { name: 'rq_timeout', value: String(v.rq_timeout) },
              { name: 'rq_total', value: String(v.rq_total) },
              { name: 'cx_active', type: 'GAUGE', value: String(v.cx_active) },
              { name: 'rq_active', type: 'GAUGE', value: String(v.rq_active) },
            ],
            health_status: {
              ...(h.ejected ? { failed_outlier_check: true } : {}),
              eds_health_status: h.edsHealthy ? 'HEALTHY' : 'UNHEALTHY',
            },
            ...(sr >= 0 ? { success_rate: { value: sr } } : {}),
            ...(lsr >= 0 ? { local_origin_success_rate: { value: lsr } } : {}),
            weight: h.weight,
            hostname: h.hostname,
            locality: { zone: h.zone },
            priority: h.priority,
          };
        }),
      };
    }),
  };
}
