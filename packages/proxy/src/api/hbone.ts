/**
 * @skua/proxy/hbone — HBONE: HTTP/2 CONNECT over mutual TLS 1.3 (ALPN h2, no SNI, the peer's
 * SPIFFE SAN checked), a client pool keyed by {source identity, destination identity,
 * destination} and a server, independent of Envoy's Cluster/Host; the byte relay every tunnel
 * uses. Re-exports only.
 */
export {
  HBONE_PORT, HBONE_STREAM_WINDOW, HBONE_CONNECTION_WINDOW, HBONE_FRAME_SIZE, HBONE_MAX_STREAMS_PER_CONNECTION, HBONE_IDLE_RELEASE_MS,
} from '../hbone/settings.ts';
export { HboneClientPool, HboneConnectError, type HboneKey, type HboneDialer, type HbonePoolOptions, type HboneStream } from '../hbone/client-pool.ts';
export { HboneServer, type HboneServerOptions, type HboneInbound } from '../hbone/server.ts';
export { mtlsDialer, dialHbone, hboneSecureContext, peerSpiffeId, HboneIdentityError } from '../hbone/mtls.ts';
export { hboneTerminal } from '../hbone/terminal.ts';
export { relay } from '../hbone/relay.ts';
