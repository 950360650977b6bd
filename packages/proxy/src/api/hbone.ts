/**
 * @skua/proxy/hbone — HBONE: HTTP/2 CONNECT over mutual TLS 1.3 (ALPN h2, no SNI, the peer's
 * SPIFFE SAN checked), a client pool keyed by {source identity, destination identity,
 * destination} and a server, independent of Envoy's Cluster/Host. Re-exports only.
 */
export {};
