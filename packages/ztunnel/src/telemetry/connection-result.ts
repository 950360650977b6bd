/**
 * The one place a connection's outcome is recorded (ztunnel's ConnectionResult): the labels are
 * built once when it opens, `record()` counts it closed (and failed, with a response flag),
 * adds its bytes and writes one access log line with ztunnel's fields:
 *   <time>\tinfo\taccess\tconnection complete\tsrc.addr=… src.workload="…" src.namespace="…"
 *   src.identity="…" dst.addr=… dst.hbone_addr=… dst.service="…" dst.workload="…" dst.namespace="…"
 *   dst.identity="…" direction="outbound" bytes_sent=… bytes_recv=… duration="…ms"
 * Identities are logged only for mutual TLS; absent values are left out.
 */
import type { Service, Workload } from '../state/model.ts';
import type { ServiceDescription } from '../outbound/request.ts';
import type { TrafficLabels, TrafficSeries, ZtunnelMetrics } from './metrics.ts';

export type ResponseFlag = '-' | 'DENY' | 'CONNECT' | 'TLS_FAILURE' | 'H2_HANDSHAKE_FAILURE' | 'NETWORK_POLICY' | 'IDENTITY_ERROR';

/** What ztunnel knows of a peer it cannot look up (from its certificate and baggage). */
export interface DerivedWorkload {
  readonly identity?: string;
  readonly workloadName?: string;
  readonly app?: string;
  readonly revision?: string;
  readonly namespace?: string;
  readonly clusterId?: string;
  readonly region?: string;
  readonly zone?: string;
}

export interface ConnectionOpen {
  readonly reporter: 'source' | 'destination';
  readonly source: Workload | undefined;
  readonly derivedSource: DerivedWorkload | undefined;
  readonly destination: Workload | undefined;
  readonly destinationService: ServiceDescription | undefined;
  readonly mtls: boolean;
  /** `ip:port` of the peer that connected. */
  readonly srcAddr: string;
  /** `ip:port` dialled (outbound) or accepted on (inbound). */
  readonly dstAddr: string;
  /** The CONNECT :authority, when HBONE. */
  readonly hboneTarget: string | undefined;
}

export type AccessLogSink = (line: string) => void;

const U = 'unknown';
const v = (s: string | undefined): string => (s === undefined || s === '' ? U : s);

export function trafficLabels(o: ConnectionOpen): TrafficLabels {
  const d = o.derivedSource, s = o.source, w = o.destination, svc = o.destinationService;
  // Derived first, then the looked-up source over it (more reliable), as ztunnel does; the
  // principal only ever comes from the TLS handshake.
  const srcName = s?.workloadName ?? d?.workloadName;
  return {
    reporter: o.reporter,
    source_workload: v(srcName), source_canonical_service: v(s?.canonicalName ?? d?.app), source_canonical_revision: v(s?.canonicalRevision ?? d?.revision),
    source_workload_namespace: v(s?.namespace ?? d?.namespace), source_principal: v(d?.identity),
    source_app: v(s ? s.canonicalName : d?.workloadName), source_version: v(s?.canonicalRevision ?? d?.revision), source_cluster: v(s?.clusterId ?? d?.clusterId),
    destination_service: v(svc?.hostname), destination_service_namespace: v(svc?.namespace), destination_service_name: v(svc?.name),
    destination_workload: v(w?.workloadName), destination_canonical_service: v(w?.canonicalName), destination_canonical_revision: v(w?.canonicalRevision),
    destination_workload_namespace: v(w?.namespace), destination_principal: v(w?.identity), destination_app: v(w?.canonicalName),
    destination_version: v(w?.canonicalRevision), destination_cluster: v(w?.clusterId),
    request_protocol: 'tcp', response_flags: '-', connection_security_policy: o.mtls ? 'mutual_tls' : 'unknown',
    locality: s || d || w ? {
      source_region: v(s?.locality.region ?? d?.region), source_zone: v(s?.locality.zone ?? d?.zone),
      destination_region: v(w?.locality.region), destination_zone: v(w?.locality.zone),
    } : undefined,
  };
}

export function describeService(s: Service): ServiceDescription {
  return { hostname: s.hostname, name: s.name, namespace: s.namespace };
}

function q(s: string): string {
  return JSON.stringify(s);
}

/** ztunnel's time format: RFC 3339 with microseconds. */
function timestamp(): string {
  const iso = new Date().toISOString();
  return `${iso.slice(0, -1)}000Z`;
}

export class ConnectionResult {
  private readonly metrics: ZtunnelMetrics;
  private readonly sink: AccessLogSink;
  private readonly open: ConnectionOpen;
  private readonly labels: TrafficLabels;
  /** Bytes count under the labels the connection opened with (ztunnel fetches those counters at open). */
  private readonly openSeries: TrafficSeries;
  private readonly started = performance.now();
  private recorded = false;
  /** Bytes from the peer that connected (downstream → upstream) and back. */
  bytesIn = 0;
  bytesOut = 0;

  constructor(metrics: ZtunnelMetrics, sink: AccessLogSink, open: ConnectionOpen) {
    this.metrics = metrics;
    this.sink = sink;
    this.open = open;
    this.labels = trafficLabels(open);
    this.openSeries = metrics.seriesFor(this.labels);
    this.openSeries.opened++;
    metrics.socketsOpen[open.reporter]++;
  }

  /** Records the outcome once: metrics, then the access log line. */
  record(error: string | undefined, flag?: ResponseFlag): void {
    if (this.recorded) return;
    this.recorded = true;
    const labels = this.labels;
    if (flag) labels.response_flags = flag;
    else if (error !== undefined) labels.response_flags = 'CONNECT';
    this.metrics.socketsOpen[this.open.reporter]--;
    // The labels it opened with, unless a failure flag changed them.
    const series = labels.response_flags === '-' ? this.openSeries : this.metrics.seriesFor(labels);
    series.closed++;
    if (labels.response_flags !== '-') series.failed++;
    // received = the request direction (from the caller), sent = the response direction, on both sides.
    this.openSeries.received += this.bytesIn;
    this.openSeries.sent += this.bytesOut;
    this.sink(this.line(error));
  }

  line(error: string | undefined): string {
    const o = this.open, l = this.labels, mtls = o.mtls;
    const f: string[] = [`src.addr=${o.srcAddr}`];
    const srcName = o.source?.name ?? o.derivedSource?.workloadName ?? o.source?.canonicalName;
    if (srcName) f.push(`src.workload=${q(srcName)}`);
    if (l.source_workload_namespace !== U) f.push(`src.namespace=${q(l.source_workload_namespace)}`);
    if (mtls && l.source_principal !== U) f.push(`src.identity=${q(l.source_principal)}`);
    f.push(`dst.addr=${o.dstAddr}`);
    if (o.hboneTarget) f.push(`dst.hbone_addr=${o.hboneTarget}`);
    if (l.destination_service !== U) f.push(`dst.service=${q(l.destination_service)}`);
    const dstName = o.destination?.name;
    if (dstName) f.push(`dst.workload=${q(dstName)}`);
    if (l.destination_workload_namespace !== U) f.push(`dst.namespace=${q(l.destination_workload_namespace)}`);
    if (mtls && l.destination_principal !== U) f.push(`dst.identity=${q(l.destination_principal)}`);
    f.push(`direction=${q(o.reporter === 'source' ? 'outbound' : 'inbound')}`);
    // Unflipped for logs: what this side sent and received.
    const sent = o.reporter === 'source' ? this.bytesIn : this.bytesOut;
    const recv = o.reporter === 'source' ? this.bytesOut : this.bytesIn;
    f.push(`bytes_sent=${sent}`, `bytes_recv=${recv}`, `duration=${q(`${Math.round(performance.now() - this.started)}ms`)}`);
    if (error !== undefined) f.push(`error=${q(error)}`);
    return `${timestamp()}\t${error === undefined ? 'info' : 'error'}\taccess\tconnection complete\t${f.join(' ')}`;
  }
}

/** A connection refused before enough was known for the full record (ztunnel's log_early_deny). */
export function earlyDenyLine(srcAddr: string, dstAddr: string, reporter: 'source' | 'destination', error: string): string {
  return `${timestamp()}\twarn\taccess\tconnection failed\tsrc.addr=${srcAddr} dst.addr=${dstAddr} direction=${q(reporter === 'source' ? 'outbound' : 'inbound')} error=${q(error)}`;
}
