/**
 * What every proxy of one workload shares: the state, its socket factory, telemetry, the
 * connection manager, and the HBONE client (the core's pool, behind the small interface below so
 * routing and relaying do not depend on its construction).
 */
import type { Duplex } from 'node:stream';
import type { ConnectionManager } from '../connections.ts';
import type { ProxyState } from '../state/store.ts';
import type { Workload } from '../state/model.ts';
import type { ZtunnelMetrics } from '../telemetry/metrics.ts';
import type { AccessLogSink } from '../telemetry/connection-result.ts';
import type { Rng } from '../state/upstream.ts';
import type { SocketFactory } from './sockets.ts';

/** The HBONE pool's key (API.md: @skua/proxy/hbone HboneKey). */
export interface HboneKey {
  readonly sourceIdentity: string;
  readonly destinationIdentity: string;
  /** ip:port of the HBONE endpoint. */
  readonly destination: string;
}

/** One per pod: its connections are dialled from the pod's namespace, with its certificates. */
export interface HboneConnector {
  /** Opens CONNECT `authority`; rejects with an error carrying `status` (the peer's HTTP status) or `code`. */
  connect(key: HboneKey, authority: string, headers: Record<string, string>): Promise<{ readonly stream: Duplex }>;
  close(): void;
}

export interface ProxyInputs {
  readonly state: ProxyState;
  readonly network: string;
  readonly hbonePort: number;
  readonly illegalPorts: ReadonlySet<number>;
  readonly metrics: ZtunnelMetrics;
  readonly accessLog: AccessLogSink;
  readonly connections: ConnectionManager;
  readonly sockets: SocketFactory;
  /** Undefined until the HBONE pool is wired: HBONE destinations then fail with CONNECT. */
  readonly hbone: HboneConnector | undefined;
  /** The proxy's uid (the pod's, from the CNI): connections are tracked and drained under it. */
  readonly proxyUid: string;
  /** The workload this proxy serves (resolved from WDS on each use: it may arrive after the pod). */
  localWorkload(): Workload | undefined;
  /** Take the client's address as the upstream source on inbound (IP_TRANSPARENT). */
  readonly originalSource: boolean;
  readonly rng: Rng;
}
