import type { Socket } from 'node:net';
import type { PeerCertificate } from 'node:tls';

/** What a network filter knows about its downstream connection. Built once per connection. */
export interface ConnInfo {
  readonly id: number;
  readonly remoteAddress: string;
  readonly remotePort: number;
  readonly localAddress: string;
  readonly localPort: number;
  /** Where the client meant to connect (SO_ORIGINAL_DST, or the local address without NAT). */
  readonly originalDst: { address: string; port: number };
  readonly tls: boolean;
  readonly serverName: string;
  readonly alpn: string;
  /** URI SANs of the verified peer certificate (SPIFFE ids), empty without mutual TLS. */
  readonly peerUriSans: readonly string[];
  /** URI SANs of our own certificate on a TLS connection (telemetry's destination principal). */
  readonly localUriSans?: readonly string[];
  /** The verified downstream client certificate (mutual TLS only), for XFCC. */
  readonly peerCertificate?: PeerCertificate;
  /** Dynamic metadata the connection arrived with (internal listeners: internal_upstream passthrough_metadata). */
  readonly dynamicMetadata?: Readonly<Record<string, unknown>>;
  readonly startTime: number;
  /** Per-connection facts filters hand to later filters (Envoy's filter state), made on first use. */
  filterState: Map<string, unknown> | undefined;
  /** Connection-level dynamic metadata (network RBAC's shadow results), made on first use. */
  metadata?: Map<string, Record<string, unknown>>;
  /** Why a filter closed the connection (Envoy's CONNECTION_TERMINATION_DETAILS). */
  terminationDetails?: string;
}

const infos = new WeakMap<Socket, ConnInfo>();

export function setConnInfo(socket: Socket, info: ConnInfo): void {
  infos.set(socket, info);
}

export function connInfoOf(socket: Socket): ConnInfo | undefined {
  return infos.get(socket);
}

let nextId = 1;
export function nextConnectionId(): number {
  return nextId++;
}
