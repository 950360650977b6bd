import type { Msg } from '../../../config/fields.ts';
import { compileAccessLogs, type AccessLogger } from '../../../telemetry/access-log.ts';
import { compileHeaderOpsFrom, compileHeaderValue, type HeaderOps } from '../../../http/header-ops.ts';
import type { LogEntry } from '../../../telemetry/log-entry.ts';

/** tunneling_config: the CONNECT the stream is wrapped in. */
export interface TunnelConfig {
  /** The :authority, a format string evaluated per connection (%DOWNSTREAM_LOCAL_ADDRESS% and friends). */
  readonly hostname: (rec: LogEntry) => string;
  readonly headers: HeaderOps;
  /** Keep the CONNECT response headers as filter state `envoy.tcp_proxy.propagate_response_headers`. */
  readonly propagateResponseHeaders: boolean;
}

export const TCP_PROXY_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

export interface TcpProxyConfig {
  readonly statPrefix: string;
  readonly cluster: string;
  readonly weighted: ReadonlyArray<{ name: string; weight: number }>;
  readonly totalWeight: number;
  readonly idleTimeoutMs: number;
  readonly maxConnectAttempts: number;
  /** Encapsulate the stream in an HTTP/2 CONNECT (tunneling_config). */
  readonly tunnel: TunnelConfig | undefined;
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
  return {
    statPrefix: m.requiredStr('stat_prefix'),
    cluster,
    weighted,
    totalWeight: weighted.reduce((a, c) => a + c.weight, 0),
    idleTimeoutMs: m.durationMs('idle_timeout', 3_600_000),
    maxConnectAttempts: Math.max(1, m.num('max_connect_attempts', 1)),
    tunnel: tc ? compileTunnel(tc) : undefined,
    accessLogs: compileAccessLogs(m.list('access_log')),
  };
}

function compileTunnel(tc: Msg): TunnelConfig {
  if (tc.bool('use_post')) throw tc.error('use_post', 'POST tunneling is not supported');
  for (const f of ['post_path', 'propagate_response_trailers', 'request_id_extension', 'request_id_header', 'request_id_metadata_key']) {
    if (tc.has(f)) throw tc.error(f, 'is not supported yet');
  }
  const { literal, format } = compileHeaderValue(tc.requiredStr('hostname'), 'request', tc.field('hostname'));
  const none = {};
  return {
    hostname: format ? (rec) => format(none, rec) : () => literal,
    // headers_to_add are HeaderValueOptions with the same formatters as route header ops.
    headers: compileHeaderOpsFrom(tc, 'headers_to_add', NO_REMOVE_FIELD, 'request'),
    propagateResponseHeaders: tc.bool('propagate_response_headers'),
  };
}

/** TunnelingConfig has no headers_to_remove: this field name never exists. */
const NO_REMOVE_FIELD = '(none)';
