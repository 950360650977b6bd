/**
 * ztunnel's DNS proxy, one per pod on 127.0.0.1:15053 inside the pod's namespace (the in-pod rules
 * send the pod's DNS there): mesh hostnames are answered from WDS — each service visible to the
 * pod's namespace, by its VIPs on ztunnel's network (a headless service by its endpoints' IPs),
 * under the Kubernetes short names for the pod's namespace — and everything else is forwarded to
 * the node's resolvers. The core's DNS proxy does the wire work; this supplies the names.
 */
import { DnsProxy, Forwarder, listenInNetns, NameTable, udpInNetns, type NameInfo } from '../core.ts';
import type { ProxyState } from '../state/store.ts';

export interface PodDnsOptions {
  readonly netnsFd: number;
  /** The pod's namespace: short names resolve relative to it. */
  readonly namespace: string;
  readonly state: ProxyState;
  readonly network: string;
  readonly clusterDomain: string;
  readonly forwarder: Forwarder;
  readonly port: number;
  readonly address?: string;
}

/** Service hostnames → the names table entries a client in `namespace` may resolve. */
export function serviceNameInfos(state: ProxyState, network: string, namespace: string, clusterDomain: string): Map<string, NameInfo> {
  const out = new Map<string, NameInfo>();
  for (const s of state.servicesByKey.values()) {
    if (s.visibility === 'Namespace' && s.namespace !== namespace) continue;
    // Another namespace's service with the same hostname loses to ours (and to a canonical one).
    if (out.has(s.hostname) && s.namespace !== namespace && !s.canonical) continue;
    let ips = s.vips.filter((v) => v.network === network).map((v) => v.address);
    if (ips.length === 0) {
      ips = state.endpointsOf(s).flatMap((ep) => state.workloadsByUid.get(ep.workloadUid)?.workloadIps ?? []);
    }
    const kube = s.hostname.endsWith(`.svc.${clusterDomain}`);
    out.set(s.hostname, { ips, registry: kube ? 'Kubernetes' : 'External', shortname: s.name, namespace: s.namespace, altHosts: [] });
  }
  return out;
}

export interface PodDns {
  readonly proxy: DnsProxy;
  close(): Promise<void>;
}

export async function startPodDns(o: PodDnsOptions): Promise<PodDns> {
  const ctx = {
    proxyNamespace: o.namespace, proxyDomain: `${o.namespace}.svc.${o.clusterDomain}`,
    searchDomains: [`${o.namespace}.svc.${o.clusterDomain}`, `svc.${o.clusterDomain}`, o.clusterDomain],
  };
  const proxy = new DnsProxy({
    addresses: [o.address ?? '127.0.0.1'], port: o.port, forwarder: o.forwarder,
    bind: async (address, port) => ({ tcp: await listenInNetns(o.netnsFd, address, port), udp: await udpInNetns(o.netnsFd, address, port) }),
  });
  const rebuild = (): void => proxy.setTable(new NameTable(serviceNameInfos(o.state, o.network, o.namespace, o.clusterDomain), ctx));
  rebuild();
  const unsubscribe = o.state.subscribe({ changed: rebuild });
  await proxy.start();
  return { proxy, close: async () => { unsubscribe(); await proxy.close(); } };
}
