/**
 * Everything skua-ztunnel takes from the shared core (@skua/proxy), in one place: when the core's
 * export map changes, only this file follows it.
 */
export { ConfigError } from '@skua/proxy/core/errors.ts';
export { log, setLogLevel } from '@skua/proxy/core/log.ts';
export type { AuthzFacts } from '@skua/proxy/policy/facts.ts';
export {
  compileIstioAuthorization, decideIstio, peerIdentity,
  type CompiledIstioPolicy, type IstioAuthorization, type IstioDecision, type IstioMatch, type IstioStringMatch, type PeerIdentity,
} from '@skua/proxy/policy/istio-authz.ts';
export { decodeResource } from '@skua/proxy/xds/decode.ts';
export { encodeResource } from '@skua/proxy/xds/encode.ts';
export { TYPE_URL } from '@skua/proxy/xds/discovery.ts';
export type { XdsHandler, XdsRejection, XdsUpdate } from '@skua/proxy/xds/types.ts';
export { parseGoDuration } from '@skua/proxy/tls/identity-env.ts';
export { AdsClient } from '@skua/proxy/xds/ads-client.ts';
export { StatsStore } from '@skua/proxy/stats/store.ts';
export { typeForUrl } from '@skua/proxy/xds/protos.ts';
export {
  listenInNetns, netnsAvailable, SeqpacketServer, SeqpacketSocket, socketInNetns, udpInNetns, type NetnsSocketOptions, type SeqpacketMessage,
} from '@skua/proxy/sys/netns.ts';
export { createSocket, getOriginalDst, originalDestination } from '@skua/proxy/sys/sockopt.ts';
export { DnsProxy } from '@skua/proxy/dns/server.ts';
export { Forwarder, readResolvConf } from '@skua/proxy/dns/forward.ts';
export { NameTable, type NameInfo } from '@skua/proxy/dns/table.ts';
