/**
 * The inbound decision for one HBONE CONNECT (ztunnel's build_inbound_request), before any socket:
 * parse :authority (ip:port, or service-hostname:port), check it names this workload (or one whose
 * waypoint this is), map the port (a service port → its target port, an application tunnel's
 * port), and assemble the authorization facts. Errors carry ztunnel's status: 400 for a bad or
 * mismatched authority, 503 when no upstream can be derived. Authorization (401) comes after.
 */
import { canonicalIpText, type AuthzFacts } from '../core.ts';
import type { Service, Workload } from '../state/model.ts';
import type { ProxyState } from '../state/store.ts';
import { findAddress, findGateway } from '../state/upstream.ts';
import type { ServiceDescription, SocketAddress } from '../outbound/request.ts';

export type HboneAddress = { readonly kind: 'ip'; readonly addr: SocketAddress } | { readonly kind: 'host'; readonly hostname: string; readonly port: number };

export interface InboundConn {
  /** The peer (after PROXY/HBONE: the client workload's address). */
  readonly src: SocketAddress;
  /** The local address the connection arrived on (pod ip:15008). */
  readonly dst: SocketAddress;
  /** The client's verified SPIFFE id; undefined for plaintext. */
  readonly srcIdentity: string | undefined;
}

export interface InboundRequest {
  /** Where to connect: this workload's IP and the resolved port. */
  readonly upstream: SocketAddress;
  /** The application tunnel (PROXY protocol) and the address to announce in it. */
  readonly tunnel: { readonly protocol: 'NONE' | 'PROXY'; readonly target: SocketAddress } | undefined;
  readonly facts: AuthzFacts;
  readonly source: Workload | undefined;
  readonly destinationService: ServiceDescription | undefined;
  /** The service host the caller named (Forwarded: host=), shown as originalDst in the connections dump. */
  readonly forHost: string | undefined;
}

export class InboundError extends Error {
  readonly status: 400 | 401 | 503;
  constructor(status: 400 | 401 | 503, message: string) {
    super(message);
    this.name = 'InboundError';
    this.status = status;
  }
}

const NONE: readonly string[] = Object.freeze([]);

/** `10.0.0.1:80`, `[fd00::1]:80` or `reviews.default.svc.cluster.local:9080`. */
export function parseAuthority(authority: string): HboneAddress | undefined {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]+)):(\d{1,5})$/.exec(authority);
  if (!m || Number(m[3]) > 65535) return undefined;
  const host = m[1] ?? m[2];
  const port = Number(m[3]);
  const ip = canonicalIpText(host);
  if (ip !== undefined) return { kind: 'ip', addr: { address: ip, port } };
  if (m[1] !== undefined || !/^[a-zA-Z0-9.-]+$/.test(host)) return undefined;
  return { kind: 'host', hostname: host.toLowerCase(), port };
}

/** `for="…";host=reviews.default.svc.cluster.local` → the host. */
export function parseForwardedHost(forwarded: string | undefined): string | undefined {
  if (!forwarded) return undefined;
  for (const part of forwarded.split(';')) {
    const [k, v] = part.split('=', 2);
    if (k?.trim().toLowerCase() === 'host' && v) return v.trim().replace(/^"|"$/g, '');
  }
  return undefined;
}

/** Is the HBONE target one whose waypoint is `local` (a waypoint sandwich), so a differing IP is fine? */
function targetUsesUs(state: ProxyState, network: string, local: Workload, dstIp: string, target: string): boolean {
  const found = findAddress(state, network, target, undefined);
  if (!found) return false;
  const wp = found.kind === 'service' ? found.service.waypoint : found.workload.waypoint;
  if (!wp) return false;
  const w = findGateway(state, wp);
  if (!w) return false;
  return w.kind === 'service' ? state.endpointsOf(w.service).some((e) => e.workloadUid === local.uid) : w.workload.workloadIps.includes(dstIp);
}

/** ztunnel's guess_inbound_service: the service the client named, else one whose target port this is. */
export function guessInboundService(state: ProxyState, services: readonly Service[], forHost: string | undefined, dstPort: number, local: Workload): ServiceDescription | undefined {
  const describe = (s: Service): ServiceDescription => ({ hostname: s.hostname, name: s.name, namespace: s.namespace });
  const named = services.find((s) => s.hostname === forHost);
  if (named) return describe(named);
  const ports = local.services;
  for (const s of services) {
    for (const [sp, tp] of s.ports) {
      if (tp === dstPort || ports.get(`${s.namespace}/${s.hostname}`)?.get(sp) === dstPort) return describe(s);
    }
  }
  return undefined;
}

export interface InboundContext {
  readonly state: ProxyState;
  readonly network: string;
  readonly illegalPorts: ReadonlySet<number>;
}

export function buildInboundRequest(ctx: InboundContext, local: Workload, conn: InboundConn, authority: string, forwarded: string | undefined): InboundRequest {
  const { state } = ctx;
  const target = parseAuthority(authority);
  if (!target) throw new InboundError(400, `invalid CONNECT address ${authority}`);
  if (target.kind === 'ip' && target.addr.address !== conn.dst.address && !local.applicationTunnel
    && !targetUsesUs(state, ctx.network, local, conn.dst.address, target.addr.address)) {
    throw new InboundError(400, `ip mismatch: ${conn.dst.address} != ${target.addr.address}`);
  }
  let port: number;
  let services: Service[];
  if (target.kind === 'host') {
    const svc = state.bestServiceByHostname(target.hostname, local.namespace);
    if (!svc) throw new InboundError(503, `no service or workload for hostname: ${target.hostname}`);
    const mapped = local.services.get(`${svc.namespace}/${svc.hostname}`)?.get(target.port) ?? svc.ports.get(target.port) ?? 0;
    if (!mapped) throw new InboundError(503, `requested service ${target.hostname}:${target.port} found, but cannot resolve port`);
    port = mapped;
    services = [svc];
  } else {
    port = target.addr.port;
    services = state.servicesOf(local);
  }
  if (ctx.illegalPorts.has(port)) throw new InboundError(503, 'attempted recursive call to ourselves');
  let upstream: SocketAddress = { address: conn.dst.address, port };
  let tunnel: InboundRequest['tunnel'];
  const at = local.applicationTunnel;
  if (at) {
    let announced: SocketAddress;
    if (target.kind === 'host') {
      // PROXY cannot carry a hostname: announce the service's VIP (our network, IPv4 first).
      const vips = services[0].vips.filter((v) => v.network === ctx.network);
      const vip = vips.find((v) => !v.address.includes(':')) ?? vips[0] ?? services[0].vips[0];
      if (!vip) throw new InboundError(503, `requested service ${target.hostname} found, but has no IP addresses`);
      announced = { address: vip.address, port: target.port };
    } else {
      announced = target.addr;
    }
    upstream = { address: conn.dst.address, port: at.port ?? port };
    tunnel = { protocol: at.protocol, target: announced };
  }
  const forHost = parseForwardedHost(forwarded);
  const facts: AuthzFacts = {
    directRemoteIp: conn.src.address, remoteIp: conn.src.address, destinationIp: upstream.address, destinationPort: upstream.port,
    requestedServerName: '', tls: conn.srcIdentity !== undefined, peerUriSans: conn.srcIdentity ? [conn.srcIdentity] : NONE,
    peerDnsSans: NONE, peerSubject: '', filterState: undefined, metadata: undefined, request: undefined,
  };
  return {
    upstream, tunnel, facts, forHost,
    source: state.workloadByAddress(ctx.network, conn.src.address),
    destinationService: guessInboundService(state, services, forHost, port, local),
  };
}
