/**
 * @skua/proxy/dns — the DNS proxy (UDP and TCP, answers from a name table, forwards the rest
 * through a bounded cache), the name table built from NameInfo entries, and the forwarder.
 * Re-exports only.
 */
export { DnsProxy, type DnsProxyOptions, type DnsCounters } from '../dns/server.ts';
export { Forwarder, readResolvConf, type ForwarderOptions, type Upstream } from '../dns/forward.ts';
export { NameTable, ANSWER_TTL, type NameInfo, type TableContext, type Lookup } from '../dns/table.ts';
