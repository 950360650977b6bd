/**
 * The outbound decision, made before any socket is touched (ztunnel's build_request): from the
 * source workload and the original destination to a plain record — protocol (HBONE or plain
 * TCP), the next hop to dial, the CONNECT :authority, the identities the next hop must present,
 * and the service the caller meant. Routing is therefore unit-testable without I/O.
 *
 * Order: a service VIP with a waypoint goes to the waypoint; else the destination resolves to a
 * workload (a VIP load-balanced over endpoints); a workload with a waypoint (and not addressed
 * through a service, and not called by that waypoint) goes to it; HBONE workloads are dialled on
 * 15008 with :authority = workload ip:target port; others get plain TCP; an address unknown to the
 * mesh (or a PASSTHROUGH service) passes through as plain TCP to the original destination.
 */
import type { Service, Workload } from '../state/model.ts';
import type { ProxyState } from '../state/store.ts';
import {
  findAddress, finalize, fromWaypoint, resolveGateway, RoutingError, upstreamFromService, weightedPick, type Rng, type Upstream,
} from '../state/upstream.ts';

export interface SocketAddress {
  readonly address: string;
  readonly port: number;
}

export interface ServiceDescription {
  readonly hostname: string;
  readonly name: string;
  readonly namespace: string;
}

export interface OutboundRequest {
  readonly protocol: 'HBONE' | 'TCP';
  readonly source: Workload;
  /** Where the TCP (or TLS) connection goes: the workload, its 15008, or a waypoint. */
  readonly actualDestination: SocketAddress;
  /** The workload behind actualDestination (the waypoint when there is one); undefined for passthrough. */
  readonly actualDestinationWorkload: Workload | undefined;
  /** HBONE only: the CONNECT :authority (the original VIP:port through a waypoint). */
  readonly hboneTarget: SocketAddress | undefined;
  /** The service the caller addressed (never the waypoint's). */
  readonly intendedService: ServiceDescription | undefined;
  /** Identities (SPIFFE URIs) the next hop may present: the service's SANs and the workload's identity. */
  readonly upstreamSans: readonly string[];
  /** How it was decided, for logs and tests. */
  readonly via: 'service-waypoint' | 'workload-waypoint' | 'workload' | 'passthrough';
}

export interface OutboundContext {
  readonly state: ProxyState;
  /** The HBONE port of peers (15008). */
  readonly hbonePort: number;
  /** Ports that must never be dialled on loopback (ztunnel's own: 15001, 15006, 15008). */
  readonly illegalPorts: ReadonlySet<number>;
  readonly rng: Rng;
}

function describe(s: Service): ServiceDescription {
  return { hostname: s.hostname, name: s.name, namespace: s.namespace };
}

function sansOf(u: Upstream): string[] {
  const out = u.serviceSans.filter((s) => s.startsWith('spiffe://'));
  out.push(u.workload.identity);
  return out;
}

function dial(u: Upstream): SocketAddress {
  if (u.selectedIp === undefined) throw new RoutingError('no_valid_destination', `no valid routing destination for workload: ${u.workload.uid}`);
  return { address: u.selectedIp, port: u.port };
}

function crossNetwork(u: Upstream): never {
  throw new RoutingError('unsupported', `unsupported feature: ${u.workload.uid} is on network "${u.workload.network}"; cross-network traffic through an east-west gateway (double HBONE) is not implemented`);
}

function isLoopback(ip: string): boolean {
  return ip.startsWith('127.') || ip === '::1';
}

/** Decides where one outbound connection goes. Throws RoutingError (logged and the connection closed). */
export function buildOutboundRequest(ctx: OutboundContext, source: Workload, downstreamIp: string, target: SocketAddress): OutboundRequest {
  if (isLoopback(target.address) && ctx.illegalPorts.has(target.port)) {
    throw new RoutingError('self_call', 'attempted recursive call to ourselves');
  }
  const { state } = ctx;
  const found = findAddress(state, source.network, target.address, source.namespace);
  const service = found?.kind === 'service' ? found.service : undefined;
  if (service) {
    const gw = pickServiceWaypoint(service, ctx.rng);
    if (gw) {
      const wp = resolveGateway(state, gw, source, target.address, ctx.rng);
      if (wp.workload.network !== source.network) crossNetwork(wp);
      return {
        protocol: 'HBONE', source, actualDestination: dial(wp), actualDestinationWorkload: wp.workload, hboneTarget: target,
        intendedService: describe(service), upstreamSans: sansOf(wp), via: 'service-waypoint',
      };
    }
  }

  let upstream: Upstream | undefined;
  if (service) {
    if (service.loadBalancer?.mode !== 'Passthrough') {
      const parts = upstreamFromService(state, source, service, target.port, 'standard', ctx.rng);
      if (!parts) throw new RoutingError('no_healthy_upstream', `no healthy upstream: ${target.address}:${target.port}`);
      upstream = finalize(parts, target.address);
    }
  } else if (found?.kind === 'workload') {
    upstream = finalize({ workload: found.workload, port: target.port, service: undefined }, target.address);
  }
  if (!upstream) {
    return {
      protocol: 'TCP', source, actualDestination: target, actualDestinationWorkload: undefined, hboneTarget: undefined,
      intendedService: undefined, upstreamSans: [], via: 'passthrough',
    };
  }
  const us = upstream;
  if (us.workload.network !== source.network) crossNetwork(us);

  if (!service && !fromWaypoint(state, us.workload, source.identity, downstreamIp) && us.workload.waypoint) {
    const wp = resolveGateway(state, us.workload.waypoint, source, target.address, ctx.rng);
    return {
      protocol: 'HBONE', source, actualDestination: dial(wp), actualDestinationWorkload: wp.workload, hboneTarget: target,
      intendedService: us.service ? describe(us.service) : undefined, upstreamSans: sansOf(wp), via: 'workload-waypoint',
    };
  }

  const workloadAddr = dial(us);
  const hbone = us.workload.protocol === 'HBONE';
  return {
    protocol: hbone ? 'HBONE' : 'TCP', source,
    actualDestination: hbone ? { address: workloadAddr.address, port: ctx.hbonePort } : workloadAddr,
    actualDestinationWorkload: us.workload,
    hboneTarget: hbone ? workloadAddr : undefined,
    intendedService: us.service ? describe(us.service) : undefined,
    upstreamSans: sansOf(us), via: 'workload',
  };
}

/** A weighted waypoint set samples one per connection; otherwise the single waypoint. */
function pickServiceWaypoint(s: Service, rng: Rng): Service['waypoint'] {
  return weightedPick(s.weightedWaypoints, (w) => w.weight, rng)?.destination ?? s.waypoint;
}
