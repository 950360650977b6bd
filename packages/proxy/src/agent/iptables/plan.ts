/**
 * The capture rules istio-iptables writes for a sidecar (REDIRECT mode), decided from the
 * config alone. Chains: ISTIO_INBOUND (PREROUTING → inbound ports, minus exclusions, to
 * ISTIO_IN_REDIRECT → 15006), ISTIO_OUTPUT (OUTPUT: the proxy's uid/gid and 127.0.0.6 return,
 * app-to-self over a VIP loops back through inbound, the rest to ISTIO_REDIRECT → 15001),
 * ISTIO_OUTPUT_DNS (port 53 → 15053 with conntrack zones in raw) when DNS is captured.
 */
import { parseCidr, splitList, type IptablesConfig } from './config.ts';
import { PER_FAMILY, RuleBuilder, type Rule } from './rules.ts';

export const CHAIN = {
  inbound: 'ISTIO_INBOUND',
  redirect: 'ISTIO_REDIRECT',
  inRedirect: 'ISTIO_IN_REDIRECT',
  output: 'ISTIO_OUTPUT',
  outputDns: 'ISTIO_OUTPUT_DNS',
  drop: 'ISTIO_DROP',
} as const;

export const DNS_PROXY_PORT = '15053';

export interface RulePlan {
  readonly v4: readonly Rule[];
  readonly v6: readonly Rule[];
}

interface Ranges {
  readonly wildcard: boolean;
  readonly cidrs: readonly string[];
  readonly hasLoopback: boolean;
}

/** A CIDR list (or `*`) split by family; 127.0.0.0/8 and ::1 count as loopback. */
function splitRanges(list: string): { v4: Ranges; v6: Ranges } {
  if (list === '*') return { v4: { wildcard: true, cidrs: [], hasLoopback: false }, v6: { wildcard: true, cidrs: [], hasLoopback: false } };
  const v4: string[] = [], v6: string[] = [];
  let loop4 = false, loop6 = false;
  for (const c of splitList(list)) {
    const p = parseCidr(c);
    if (!p) continue; // refused earlier by the config check
    const canonical = `${p.address}/${p.bits}`;
    if (p.v6) { v6.push(canonical); if (p.address === '::1') loop6 = true; } else { v4.push(canonical); if (p.address.startsWith('127.')) loop4 = true; }
  }
  return { v4: { wildcard: false, cidrs: v4, hasLoopback: loop4 }, v6: { wildcard: false, cidrs: v6, hasLoopback: loop6 } };
}

function inboundRules(b: RuleBuilder, cfg: IptablesConfig): void {
  if (cfg.inboundPortsInclude === '') return;
  b.append('nat', 'PREROUTING', '-p', 'tcp', '-j', CHAIN.inbound);
  if (cfg.inboundPortsInclude === '*') {
    for (const port of splitList(cfg.inboundPortsExclude)) b.append('nat', CHAIN.inbound, '-p', 'tcp', '--dport', port, '-j', 'RETURN');
    b.append('nat', CHAIN.inbound, '-p', 'tcp', '-j', CHAIN.inRedirect);
    return;
  }
  for (const port of splitList(cfg.inboundPortsInclude)) b.append('nat', CHAIN.inbound, '-p', 'tcp', '--dport', port, '-j', CHAIN.inRedirect);
}

/** Per proxy uid (owner `--uid-owner`) or gid (`--gid-owner`): self-calls over a VIP go back through inbound; the rest returns. */
function ownerRules(b: RuleBuilder, cfg: IptablesConfig, match: '--uid-owner' | '--gid-owner', id: string, dns: boolean, returnLoopback: boolean): void {
  const loop = cfg.hostIpv4LoopbackCidr;
  const ports = dns && match === '--uid-owner'
    ? ['-m', 'multiport', '!', '--dports', `53,${cfg.inboundTunnelPort}`]
    : ['!', '--dport', cfg.inboundTunnelPort];
  b.appendPerFamily(loop, '::1/128', 'nat', CHAIN.output, '-o', 'lo', '!', '-d', PER_FAMILY, '-p', 'tcp', ...ports, '-m', 'owner', match, id, '-j', CHAIN.inRedirect);
  if (returnLoopback) {
    if (dns) b.append('nat', CHAIN.output, '-o', 'lo', '-p', 'tcp', '!', '--dport', '53', '-m', 'owner', '!', match, id, '-j', 'RETURN');
    else b.append('nat', CHAIN.output, '-o', 'lo', '-m', 'owner', '!', match, id, '-j', 'RETURN');
  }
  // The proxy's own traffic is never captured, whatever the destination or protocol.
  b.append('nat', CHAIN.output, '-m', 'owner', match, id, '-j', 'RETURN');
}

function ownerGroupRules(b: RuleBuilder, cfg: IptablesConfig): void {
  if (cfg.ownerGroupsInclude === '*') {
    for (const g of splitList(cfg.ownerGroupsExclude)) b.append('nat', CHAIN.output, '-m', 'owner', '--gid-owner', g, '-j', 'RETURN');
    return;
  }
  const notAny = splitList(cfg.ownerGroupsInclude).flatMap((g) => ['-m', 'owner', '!', '--gid-owner', g]);
  b.append('nat', CHAIN.output, ...notAny, '-j', 'RETURN');
}

function dnsRules(b: RuleBuilder, cfg: IptablesConfig): void {
  const all = cfg.captureAllDns;
  const v4 = cfg.dnsServersV4, v6 = cfg.dnsServersV6;
  b.append('raw', 'OUTPUT', '-j', CHAIN.outputDns);
  if (all || v4.length > 0) b.appendV4('nat', CHAIN.output, '-j', CHAIN.outputDns);
  if (all || v6.length > 0) b.appendV6('nat', CHAIN.output, '-j', CHAIN.outputDns);
  if (all) b.append('nat', CHAIN.outputDns, '-p', 'tcp', '--dport', '53', '-j', 'REDIRECT', '--to-ports', DNS_PROXY_PORT);
  else {
    for (const s of v4) b.appendV4('nat', CHAIN.outputDns, '-p', 'tcp', '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', '--to-ports', DNS_PROXY_PORT);
    for (const s of v6) b.appendV6('nat', CHAIN.outputDns, '-p', 'tcp', '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', '--to-ports', DNS_PROXY_PORT);
  }
  if (all) b.append('nat', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-j', 'REDIRECT', '--to-port', DNS_PROXY_PORT);
  else {
    for (const s of v4) b.appendV4('nat', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'REDIRECT', '--to-port', DNS_PROXY_PORT);
    for (const s of v6) b.appendV6('nat', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'REDIRECT', '--to-port', DNS_PROXY_PORT);
  }
  // Conntrack zones: proxy ↔ upstream resolvers in zone 1, app ↔ proxy in zone 2, so the two
  // legs of one UDP exchange never collide in conntrack.
  for (const [match, ids] of [['--uid-owner', cfg.proxyUid], ['--gid-owner', cfg.proxyGid]] as const) {
    for (const id of splitList(ids)) {
      b.append('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-m', 'owner', match, id, '-j', 'CT', '--zone', '1');
      b.append('raw', CHAIN.outputDns, '-p', 'udp', '--sport', DNS_PROXY_PORT, '-m', 'owner', match, id, '-j', 'CT', '--zone', '2');
    }
  }
  if (all) {
    b.append('raw', 'PREROUTING', '-j', CHAIN.inbound);
    b.append('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-j', 'CT', '--zone', '2');
    b.append('raw', CHAIN.inbound, '-p', 'udp', '--sport', '53', '-j', 'CT', '--zone', '1');
    return;
  }
  if (v4.length) b.appendV4('raw', 'PREROUTING', '-j', CHAIN.inbound);
  for (const s of v4) {
    b.appendV4('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/32`, '-j', 'CT', '--zone', '2');
    b.appendV4('raw', CHAIN.inbound, '-p', 'udp', '--sport', '53', '-s', `${s}/32`, '-j', 'CT', '--zone', '1');
  }
  if (v6.length) b.appendV6('raw', 'PREROUTING', '-j', CHAIN.inbound);
  for (const s of v6) {
    b.appendV6('raw', CHAIN.outputDns, '-p', 'udp', '--dport', '53', '-d', `${s}/128`, '-j', 'CT', '--zone', '2');
    b.appendV6('raw', CHAIN.inbound, '-p', 'udp', '--sport', '53', '-s', `${s}/128`, '-j', 'CT', '--zone', '1');
  }
}

function outboundIncludeRules(b: RuleBuilder, cfg: IptablesConfig, ranges: Ranges, v6: boolean): void {
  const append = v6 ? b.appendV6.bind(b) : b.appendV4.bind(b);
  const insert = v6 ? b.insertV6.bind(b) : b.insertV4.bind(b);
  const virt = splitList(cfg.rerouteVirtualInterfaces);
  if (ranges.wildcard) {
    append('nat', CHAIN.output, '-j', CHAIN.redirect);
    for (const nic of virt) insert('nat', 'PREROUTING', 1, '-i', nic, '-j', CHAIN.redirect);
    return;
  }
  for (const cidr of ranges.cidrs) {
    for (const nic of virt) insert('nat', 'PREROUTING', 1, '-i', nic, '-d', cidr, '-j', CHAIN.redirect);
    append('nat', CHAIN.output, '-d', cidr, '-j', CHAIN.redirect);
  }
}

/** The rules for both families, in the order istio-iptables emits them. */
export function planRules(cfg: IptablesConfig): RulePlan {
  const b = new RuleBuilder(cfg.enableIpv6);
  const exclude = splitRanges(cfg.outboundIpRangesExclude);
  const include = splitRanges(cfg.outboundIpRangesInclude);
  // DNS capture needs somewhere to send it: all of port 53, or the resolvers in resolv.conf.
  const dns = cfg.redirectDns && (cfg.captureAllDns || cfg.dnsServersV4.length > 0 || cfg.dnsServersV6.length > 0);

  for (const nic of splitList(cfg.excludeInterfaces)) {
    b.append('nat', 'PREROUTING', '-i', nic, '-j', 'RETURN');
    b.append('nat', 'OUTPUT', '-o', nic, '-j', 'RETURN');
  }
  for (const nic of splitList(cfg.rerouteVirtualInterfaces)) b.insert('nat', 'PREROUTING', 1, '-i', nic, '-j', 'RETURN');
  if (cfg.dropInvalid) {
    b.append('mangle', 'PREROUTING', '-m', 'conntrack', '--ctstate', 'INVALID', '-j', CHAIN.drop);
    b.append('mangle', CHAIN.drop, '-j', 'DROP');
  }
  // HBONE's tunnel port is never captured inbound.
  b.append('nat', CHAIN.inbound, '-p', 'tcp', '--dport', cfg.inboundTunnelPort, '-j', 'RETURN');
  b.append('nat', CHAIN.redirect, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', cfg.proxyPort);
  b.append('nat', CHAIN.inRedirect, '-p', 'tcp', '-j', 'REDIRECT', '--to-ports', cfg.inboundCapturePort);
  inboundRules(b, cfg);

  b.append('nat', 'OUTPUT', '-j', CHAIN.output);
  for (const port of splitList(cfg.outboundPortsExclude)) {
    b.append('nat', CHAIN.output, '-p', 'tcp', '--dport', port, '-j', 'RETURN');
    b.append('nat', CHAIN.output, '-p', 'udp', '--dport', port, '-j', 'RETURN');
  }
  // The inbound side connects to the app from 127.0.0.6 (::6): let that through untouched.
  b.appendPerFamily('127.0.0.6/32', '::6/128', 'nat', CHAIN.output, '-o', 'lo', '-s', PER_FAMILY, '-j', 'RETURN');
  const returnLoopback = !include.v4.hasLoopback && !include.v6.hasLoopback;
  for (const uid of splitList(cfg.proxyUid)) ownerRules(b, cfg, '--uid-owner', uid, dns, returnLoopback);
  for (const gid of splitList(cfg.proxyGid)) ownerRules(b, cfg, '--gid-owner', gid, dns, returnLoopback);
  ownerGroupRules(b, cfg);
  if (dns) dnsRules(b, cfg);

  // Apps that talk to localhost on purpose (and to the proxy's own ports) are left alone.
  b.appendPerFamily(cfg.hostIpv4LoopbackCidr, '::1/128', 'nat', CHAIN.output, '-d', PER_FAMILY, '-j', 'RETURN');
  for (const cidr of exclude.v4.cidrs) b.appendV4('nat', CHAIN.output, '-d', cidr, '-j', 'RETURN');
  for (const cidr of exclude.v6.cidrs) b.appendV6('nat', CHAIN.output, '-d', cidr, '-j', 'RETURN');
  for (const port of splitList(cfg.outboundPortsInclude)) b.append('nat', CHAIN.output, '-p', 'tcp', '--dport', port, '-j', CHAIN.redirect);
  outboundIncludeRules(b, cfg, include.v4, false);
  outboundIncludeRules(b, cfg, include.v6, true);
  return { v4: b.v4, v6: b.v6 };
}
