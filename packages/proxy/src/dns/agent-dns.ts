/**
 * The agent's DNS proxy, started when DNS capture is on (ISTIO_META_DNS_CAPTURE=true, in the
 * environment or ProxyConfig.proxyMetadata): it listens on DNS_PROXY_ADDR (localhost:15053;
 * "localhost" means 127.0.0.1, plus ::1 when resolv.conf has IPv6 servers), forwards to
 * resolv.conf's servers, and takes its table from NDS through the xDS sink returned here.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { ConfigError } from '../core/errors.ts';
import { logger } from '../core/log.ts';
import type { ExtraTypeSink } from '../xds/dynamic-config.ts';
import { Forwarder, readResolvConf } from './forward.ts';
import { DnsProxy } from './server.ts';
import { NameTable, type NameInfo, type TableContext } from './table.ts';

const log = logger('dns');

type Json = Record<string, unknown>;

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
const str = (v: unknown): string => (typeof v === 'string' ? v : '');

/** A decoded istio.networking.nds.v1.NameTable (proto-JSON) → host → NameInfo. */
export function nameInfos(json: Json): Map<string, NameInfo> {
  const out = new Map<string, NameInfo>();
  const table = (json.table ?? {}) as Record<string, Json>;
  for (const [host, ni] of Object.entries(table)) {
    out.set(host, {
      ips: strings(ni.ips), registry: str(ni.registry), shortname: str(ni.shortname), namespace: str(ni.namespace),
      altHosts: strings(ni.alt_hosts ?? ni.altHosts),
    });
  }
  return out;
}

export interface AgentDns {
  readonly proxy: DnsProxy;
  /** Register under TYPE_URL.nameTable: every NDS update replaces the table. */
  readonly sink: ExtraTypeSink;
  /** The NameTable as last received (pilot-agent's /debug/ndsz). */
  lastTable(): Json | undefined;
}

export interface AgentDnsOptions {
  /** DNS_PROXY_ADDR, host:port. */
  readonly address: string;
  readonly proxyNamespace: string;
  readonly proxyDomain: string;
  readonly resolvConf?: string;
}

function splitAddress(address: string): { host: string; port: number } {
  const m = /^\[?([^\]]*)\]?:(\d+)$/.exec(address);
  if (!m || Number(m[2]) > 65535) throw new ConfigError('DNS_PROXY_ADDR', `expected host:port, got "${address}"`);
  return { host: m[1], port: Number(m[2]) };
}

export async function startAgentDns(opts: AgentDnsOptions): Promise<AgentDns> {
  const { host, port } = splitAddress(opts.address);
  let text = opts.resolvConf;
  if (text === undefined) {
    try { text = readFileSync('/etc/resolv.conf', 'utf8'); } catch (e) { throw new ConfigError('/etc/resolv.conf', `cannot read it: ${(e as Error).message}`); }
  }
  const conf = readResolvConf(text);
  let addresses = [host];
  if (host === 'localhost' || host === '') {
    addresses = ['127.0.0.1'];
    if (conf.servers.some((s) => isIP(s.host) === 6)) addresses.push('::1');
  }
  const ctx: TableContext = { proxyNamespace: opts.proxyNamespace, proxyDomain: opts.proxyDomain, searchDomains: conf.search };
  const proxy = new DnsProxy({ addresses, port, forwarder: new Forwarder({ servers: conf.servers }) });
  await proxy.start();
  log.info(`DNS proxy on ${addresses.join(',')}:${proxy.port}, resolvers ${conf.servers.map((s) => s.host).join(',') || '(none)'}, search ${conf.search.join(' ') || '(none)'}`);
  let last: Json | undefined;
  const sink: ExtraTypeSink = {
    wildcard: true,
    apply: (_name, json) => {
      const table = new NameTable(nameInfos(json), ctx);
      proxy.setTable(table);
      last = json;
      log.debug(`DNS: name table with ${table.size} names`);
    },
    remove: () => { proxy.setTable(new NameTable(new Map(), ctx)); last = undefined; },
  };
  return { proxy, sink, lastTable: () => last };
}
