import type { ProxyServer } from '../server.ts';

/** Envoy's /clusters text: `<cluster>::<key>::<value>` and per-host `<cluster>::<ip:port>::<stat>::<value>`. */
export function clustersText(s: ProxyServer): string {
  const lines: string[] = [];
  for (const c of s.clusters.all()) {
    const n = c.config.name;
    const l = c.config.limits;
    lines.push(`${n}::observability_name::${n}`);
    lines.push(`${n}::default_priority::max_connections::${l.maxConnections}`);
    lines.push(`${n}::default_priority::max_pending_requests::${l.maxPendingRequests}`);
    lines.push(`${n}::default_priority::max_requests::${l.maxRequests}`);
    lines.push(`${n}::default_priority::max_retries::${l.maxRetries}`);
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
      lines.push(`${p}::health_flags::${h.healthy ? 'healthy' : '/failed_eds_health'}`);
      lines.push(`${p}::weight::${h.weight}`);
      lines.push(`${p}::zone::${h.zone}`);
      lines.push(`${p}::priority::${h.priority}`);
    }
  }
  return lines.join('\n') + '\n';
}

/** ?format=json: envoy.admin.v3.Clusters. */
export function clustersJson(s: ProxyServer): unknown {
  return {
    cluster_statuses: [...s.clusters.all()].map((c) => ({
      name: c.config.name,
      observability_name: c.config.name,
      added_via_api: false,
      host_statuses: c.hostSet.hosts.map((h) => ({
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
        health_status: { eds_health_status: h.healthy ? 'HEALTHY' : 'UNHEALTHY' },
        weight: h.weight,
        hostname: h.hostname,
        locality: { zone: h.zone },
        priority: h.priority,
      })),
    })),
  };
}
