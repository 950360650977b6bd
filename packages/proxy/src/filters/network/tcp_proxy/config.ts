import type { Msg } from '../../../config/fields.ts';
import { compileAccessLogs, type AccessLogger } from '../../../telemetry/access-log.ts';

export const TCP_PROXY_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

export interface TcpProxyConfig {
  readonly statPrefix: string;
  readonly cluster: string;
  readonly weighted: ReadonlyArray<{ name: string; weight: number }>;
  readonly totalWeight: number;
  readonly idleTimeoutMs: number;
  readonly maxConnectAttempts: number;
  /** Encapsulate the stream in an HTTP/2 CONNECT to this authority (tunneling_config.hostname). */
  readonly tunnelHostname: string | undefined;
  readonly tunnelHeaders: ReadonlyArray<{ key: string; value: string }>;
  readonly accessLogs: readonly AccessLogger[];
}

export function compileTcpProxy(m: Msg): TcpProxyConfig {
  for (const f of ['hash_policy', 'metadata_match', 'on_demand', 'max_downstream_connection_duration', 'access_log_options', 'backoff_options']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const weighted = (m.msg('weighted_clusters')?.list('clusters') ?? []).map((c) => ({ name: c.requiredStr('name'), weight: c.num('weight') }));
  const cluster = m.str('cluster');
  if (!cluster && weighted.length === 0) throw m.error('cluster', 'one of cluster, weighted_clusters is required');
  const tc = m.msg('tunneling_config');
  if (tc?.bool('use_post')) throw tc.error('use_post', 'POST tunneling is not supported');
  const hostname = tc?.requiredStr('hostname');
  if (hostname && /%[A-Z_]+%/.test(hostname.replace(/%DOWNSTREAM_LOCAL_PORT%|%DOWNSTREAM_LOCAL_ADDRESS%/g, ''))) {
    throw tc!.error('hostname', `unsupported formatter in ${hostname}`);
  }
  return {
    statPrefix: m.requiredStr('stat_prefix'),
    cluster,
    weighted,
    totalWeight: weighted.reduce((a, c) => a + c.weight, 0),
    idleTimeoutMs: m.durationMs('idle_timeout', 3_600_000),
    maxConnectAttempts: Math.max(1, m.num('max_connect_attempts', 1)),
    tunnelHostname: hostname,
    tunnelHeaders: (tc?.list('headers_to_add') ?? []).map((h) => {
      const hv = h.requiredMsg('header');
      return { key: hv.requiredStr('key').toLowerCase(), value: hv.str('value') };
    }),
    accessLogs: compileAccessLogs(m.list('access_log')),
  };
}
