/**
 * Mesh description → config, decided before any I/O: per sidecar node id the listeners, routes
 * and clusters istiod would push to it, plus the WDS resources every ztunnel gets.
 */
import type { Mesh } from './types.ts';
import { sidecarNodeId, type Json } from './names.ts';
import { inboundResources } from './inbound.ts';
import { outboundClusters, outboundListeners } from './outbound.ts';
import { gatewayResources } from './gateway.ts';
import { waypointResources } from './waypoint.ts';
import { discoveryWorkloads, wdsResources } from './wds.ts';
import { nameTable } from './nds.ts';

export interface MeshConfig {
  /** Outbound clusters and endpoints: the same for every sidecar. */
  readonly sharedClusters: readonly Json[];
  /** Proxy node id (sidecars, routers, waypoints) → its own listeners, routes and clusters; sidecars also get the NDS name table. */
  readonly sidecars: ReadonlyMap<string, readonly Json[]>;
  /** istio.workload.Address and istio.security.Authorization resources (ztunnel, Delta only). */
  readonly wds: readonly Json[];
  /** istio.workload.Workload resources for the waypoints' peer discovery (empty without waypoints). */
  readonly discovery?: readonly Json[];
}

export function translateMesh(mesh: Mesh): MeshConfig {
  const sidecars = new Map<string, Json[]>();
  // NDS goes to every sidecar; only those capturing DNS subscribe to it.
  const nds = nameTable(mesh);
  for (const w of mesh.workloads) {
    if (w.waypointProxy) sidecars.set(sidecarNodeId(mesh, w), waypointResources(mesh, w));
    else if (w.router) sidecars.set(sidecarNodeId(mesh, w), gatewayResources(mesh, w));
    else if (w.sidecar) sidecars.set(sidecarNodeId(mesh, w), [...outboundListeners(mesh, w), ...inboundResources(mesh, w), nds]);
  }
  return { sharedClusters: outboundClusters(mesh), sidecars, wds: wdsResources(mesh), discovery: discoveryWorkloads(mesh) };
}
