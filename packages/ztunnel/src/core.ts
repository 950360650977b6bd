/**
 * Everything skua-ztunnel takes from the shared core (@skua/proxy), in one place, through its
 * public entry modules only.
 */
export { canonicalIpText, ConfigError, createHttpServer, log, setLogLevel, StatsStore, STATUS_CODES } from '@skua/proxy/core';
export { ActiveListener, plainListener, type ConnInfo, type TerminalConfig } from '@skua/proxy/listener';
export {
  compileIstioAuthorization, decideIstio, peerIdentity,
  type AuthzFacts, type CompiledIstioPolicy, type IstioAuthorization, type IstioDecision, type IstioMatch, type IstioStringMatch, type PeerIdentity,
} from '@skua/proxy/policy';
export { AdsClient, decodeResource, encodeResource, TYPE_URL, typeForUrl, type XdsHandler, type XdsRejection, type XdsUpdate } from '@skua/proxy/xds';
export { parseGoDuration, splitPem } from '@skua/proxy/identity';
export {
  createSocket, getOriginalDst, listenInNetns, netnsAvailable, originalDestination, SeqpacketServer, SeqpacketSocket, socketInNetns, trimNativeHeap, udpInNetns,
  type NetnsSocketOptions, type SeqpacketMessage,
} from '@skua/proxy/sys';
export { DnsProxy, Forwarder, NameTable, readResolvConf, type NameInfo } from '@skua/proxy/dns';
export {
  CaError, CertificateManager, CREATE_CERTIFICATE_PATH, decodeResponse, encodeRequest,
  type CertificateIssuer, type CertificateRequest, type CertificateResponse, type WorkloadCertificate,
} from '@skua/proxy/identity';
export {
  HboneClientPool, HboneConnectError, HboneIdentityError, HboneServer, hboneSecureContext, hboneTerminal, peerSpiffeId, relay, type HboneInbound, type HboneStream,
} from '@skua/proxy/hbone';
export { spiffeSanMatches, uriSans } from '@skua/proxy/matchers';
