import type { ProxyServer } from '../server.ts';
import type { CircuitBreakerLimits } from '../upstream/cluster-config.ts';
import type { Host } from '../upstream/host.ts';

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
export function clustersText(s: ProxyServer): string {
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
      lines.push(`${p}::cx_active::${h.cxActive}`);
      lines.push(`${p}::cx_connect_fail::${h.cxConnectFail}`);
      lines.push(`${p}::cx_total::${h.cxTotal}`);
      lines.push(`${p}::rq_active::${h.activeRequests}`);
      lines.push(`${p}::rq_error::${h.rqError}`);
      lines.push(`${p}::rq_success::${h.rqSuccess}`);
      lines.push(`${p}::rq_timeout::${h.rqTimeout}`);
      lines.push(`${p}::rq_total::${h.rqTotal}`);
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
export function clustersJson(s: ProxyServer): unknown {
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
          return {
            address: { socket_address: { address: h.address, port_value: h.port } },
            stats: [
              { name: 'cx_connect_fail', value: String(h.cxConnectFail) },
              { name: 'cx_total', value: String(h.cxTotal) },
              { name: 'rq_error', value: String(h.rqError) },
              { name: 'rq_success', value: String(h.rqSuccess) },
              { name: 'rq_timeout', value: String(h.rqTimeout) },
              { name: 'rq_total', value: String(h.rqTotal) },
              { name: 'cx_active', type: 'GAUGE', value: String(h.cxActive) },
              { name: 'rq_active', type: 'GAUGE', value: String(h.activeRequests) },
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
