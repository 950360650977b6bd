/**
 * Who this proxy is, as pilot-agent's initProxy works it out: the type from the command
 * line, the IPs (INSTANCE_IP first, then the host's other addresses), the pod name and
 * namespace from POD_NAME / POD_NAMESPACE, and the DNS domain (`--domain`, else
 * `<namespace>.svc.cluster.local`).
 */
import { isIP } from 'node:net';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { ConfigError } from '../core/errors.ts';
import type { Env } from './node-metadata.ts';
import { serviceNode } from './node-metadata.ts';

export const PROXY_TYPES = ['sidecar', 'router', 'waypoint'] as const;
export type ProxyType = (typeof PROXY_TYPES)[number];

export interface ProxyIdentity {
  readonly type: ProxyType;
  /** The pod IP first (istiod takes the first as the pod IP), then the host's other addresses. */
  readonly ipAddresses: readonly string[];
  readonly podName: string;
  readonly podNamespace: string;
  readonly domain: string;
  /** `<type>~<ip>~<pod>.<namespace>~<domain>` */
  readonly id: string;
}

export function parseProxyType(s: string | undefined): ProxyType {
  if (s === undefined) return 'sidecar';
  if ((PROXY_TYPES as readonly string[]).includes(s)) return s as ProxyType;
  if (s === 'ztunnel') throw new ConfigError('', 'Invalid proxy Type: ztunnel (run skua-ztunnel for ztunnel)');
  throw new ConfigError('', `Invalid proxy Type: ${s}`);
}

type Interfaces = NodeJS.Dict<NetworkInterfaceInfo[]>;

/** network.GetPrivateIPs: every non-loopback, non-link-local unicast address of the host. */
export function hostAddresses(ifaces: Interfaces = networkInterfaces(), excludeInterfaces: readonly string[] = []): string[] {
  const out: string[] = [];
  for (const [name, addrs] of Object.entries(ifaces)) {
    if (!addrs || excludeInterfaces.includes(name)) continue;
    for (const a of addrs) {
      if (a.internal || isLinkLocal(a.address) || a.address === '0.0.0.0' || a.address === '::') continue;
      out.push(a.address.replace(/%.*$/, ''));
    }
  }
  return out;
}

function isLinkLocal(ip: string): boolean {
  return ip.startsWith('169.254.') || /^fe[89ab]/i.test(ip);
}

export interface IdentityInputs {
  readonly type: ProxyType;
  readonly env: Env;
  /** --domain ('' = derive from the namespace). */
  readonly domain: string;
  readonly interfaces?: Interfaces;
  /** traffic.sidecar.istio.io/excludeInterfaces (pod annotation): their addresses are left out. */
  readonly excludeInterfaces?: readonly string[];
}

export function proxyIdentity(i: IdentityInputs): ProxyIdentity {
  const ips: string[] = [];
  const podIp = i.env.INSTANCE_IP ?? '';
  if (isIP(podIp)) ips.push(podIp);
  let others = hostAddresses(i.interfaces, i.excludeInterfaces);
  if (others.length === 0) others = ['127.0.0.1', '::1'];
  for (const a of others) if (!ips.includes(a)) ips.push(a);
  const podName = i.env.POD_NAME ?? '';
  const podNamespace = i.env.POD_NAMESPACE ?? '';
  const domain = i.domain || `${podNamespace}.svc.cluster.local`;
  return { type: i.type, ipAddresses: ips, podName, podNamespace, domain, id: serviceNode(i.type, ips[0], podName, podNamespace, domain) };
}

/** IPv4-only, IPv6-only or dual stack, from the proxy's addresses (model.DiscoverIPMode). */
export function ipMode(ips: readonly string[]): 'ipv4' | 'ipv6' | 'dual' {
  const v4 = ips.every((a) => isIP(a) === 4);
  if (v4) return 'ipv4';
  return ips.every((a) => isIP(a) === 6) ? 'ipv6' : 'dual';
}
