/**
 * What an authorization decision may look at: a plain record of facts about one connection and,
 * for HTTP, one request. The RBAC filters build it; ztunnel and waypoint can build the same
 * record from their own state, so the engine never sees a socket or an HTTP object.
 */

export type HeaderValues = Readonly<Record<string, string | readonly string[] | undefined>>;

export interface RequestFacts {
  readonly method: string;
  /** :path as received, with the query string. */
  readonly path: string;
  readonly authority: string;
  readonly scheme: string;
  /** Request headers (lower-case names) without pseudo-headers. */
  readonly headers: HeaderValues;
}

/** Dynamic metadata: filter namespace → that namespace's Struct as plain JSON. */
export type DynamicMetadata = ReadonlyMap<string, Readonly<Record<string, unknown>>>;

export interface AuthzFacts {
  /** The peer of the TCP connection (Envoy's direct_remote_ip and source_ip). */
  readonly directRemoteIp: string;
  /** The client as the HTTP connection manager sees it (x-forwarded-for when trusted); = directRemoteIp on TCP. */
  readonly remoteIp: string;
  /** The connection's local (original destination) address and port. */
  readonly destinationIp: string;
  readonly destinationPort: number;
  /** SNI, '' when none. */
  readonly requestedServerName: string;
  /** The downstream connection is TLS (Envoy's `connection.ssl() != nullptr`). */
  readonly tls: boolean;
  /** URI SANs of the verified peer certificate. */
  readonly peerUriSans: readonly string[];
  /** DNS SANs of the verified peer certificate (empty when unknown). */
  readonly peerDnsSans: readonly string[];
  /** Subject of the peer certificate ('' when none or unknown). */
  readonly peerSubject: string;
  /** Filter state objects by key (Istio's `io.istio.peer_principal` and the like). */
  readonly filterState: ReadonlyMap<string, unknown> | undefined;
  readonly metadata: DynamicMetadata | undefined;
  /** Undefined for a network (L4) decision: header and path rules then see no request. */
  readonly request: RequestFacts | undefined;
}
