/**
 * ztunnel's connection metrics with its names and label set (istio_tcp_connections_opened_total,
 * _closed_total, _failed_total, istio_tcp_sent_bytes_total, istio_tcp_received_bytes_total,
 * istio_tcp_sockets_open), counted in plain numbers per label set and rendered at scrape time.
 * Missing label values are `unknown`, as ztunnel's DefaultedUnknown.
 */

export interface TrafficLabels {
  readonly reporter: 'source' | 'destination';
  readonly source_workload: string;
  readonly source_canonical_service: string;
  readonly source_canonical_revision: string;
  readonly source_workload_namespace: string;
  readonly source_principal: string;
  readonly source_app: string;
  readonly source_version: string;
  readonly source_cluster: string;
  readonly destination_service: string;
  readonly destination_service_namespace: string;
  readonly destination_service_name: string;
  readonly destination_workload: string;
  readonly destination_canonical_service: string;
  readonly destination_canonical_revision: string;
  readonly destination_workload_namespace: string;
  readonly destination_principal: string;
  readonly destination_app: string;
  readonly destination_version: string;
  readonly destination_cluster: string;
  readonly request_protocol: 'tcp';
  /** `-`, DENY, CONNECT, TLS_FAILURE, H2_HANDSHAKE_FAILURE, NETWORK_POLICY, IDENTITY_ERROR. */
  response_flags: string;
  readonly connection_security_policy: 'unknown' | 'mutual_tls';
  /** Present only when a source or destination workload is known (ztunnel's OptionallyEncode). */
  readonly locality: { readonly source_region: string; readonly source_zone: string; readonly destination_region: string; readonly destination_zone: string } | undefined;
}

/** The counters of one label set. */
export class TrafficSeries {
  opened = 0;
  closed = 0;
  failed = 0;
  sent = 0;
  received = 0;
  readonly labels: string;
  constructor(labels: string) {
    this.labels = labels;
  }
}

const NEEDS_ESCAPE = /[\\\n"]/;

export function escapeLabel(v: string): string {
  return NEEDS_ESCAPE.test(v) ? v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"') : v;
}

/** `name="value",…` in the label set's own order (the series key): runs per connection, so a plain loop. */
export function renderLabels(l: TrafficLabels): string {
  let out = '';
  for (const k in l) {
    if (k === 'locality') continue;
    out += `${out === '' ? '' : ','}${k}="${escapeLabel(l[k as keyof TrafficLabels] as string)}"`;
  }
  const loc = l.locality;
  if (loc) out += `,source_region="${escapeLabel(loc.source_region)}",source_zone="${escapeLabel(loc.source_zone)}",destination_region="${escapeLabel(loc.destination_region)}",destination_zone="${escapeLabel(loc.destination_zone)}"`;
  return out;
}

const FAMILIES: ReadonlyArray<readonly [keyof TrafficSeries, string, string]> = [
  ['opened', 'istio_tcp_connections_opened', 'The total number of TCP connections opened.'],
  ['closed', 'istio_tcp_connections_closed', 'The total number of TCP connections closed.'],
  ['received', 'istio_tcp_received_bytes', 'The size of total bytes received during request in case of a TCP connection.'],
  ['sent', 'istio_tcp_sent_bytes', 'The size of total bytes sent during response in case of a TCP connection.'],
  ['failed', 'istio_tcp_connections_failed', 'The total number of TCP connections that failed to establish (unstable).'],
];

export class ZtunnelMetrics {
  private readonly series = new Map<string, TrafficSeries>();
  readonly socketsOpen = { source: 0, destination: 0 };
  /** Extra families other parts register (DNS, xDS, in-pod): rendered as given. */
  private readonly extras: Array<() => string> = [];

  /** The series for a label set (created on first use; cached by the caller for the connection's life). */
  seriesFor(labels: TrafficLabels): TrafficSeries {
    const key = renderLabels(labels);
    let s = this.series.get(key);
    if (!s) { s = new TrafficSeries(key); this.series.set(key, s); }
    return s;
  }

  addFamily(render: () => string): void {
    this.extras.push(render);
  }

  render(): string {
    const out: string[] = [];
    for (const [field, name, help] of FAMILIES) {
      out.push(`# HELP ${name} ${help}`, `# TYPE ${name} counter`);
      for (const s of this.series.values()) {
        const v = s[field] as number;
        if (field === 'failed' && v === 0) continue;
        out.push(`${name}_total{${s.labels}} ${v}`);
      }
    }
    out.push('# HELP istio_tcp_sockets_open The current number of open TCP sockets (unstable).', '# TYPE istio_tcp_sockets_open gauge');
    for (const r of ['source', 'destination'] as const) out.push(`istio_tcp_sockets_open{reporter="${r}"} ${this.socketsOpen[r]}`);
    for (const f of this.extras) out.push(f());
    return `${out.join('\n')}\n`;
  }
}
