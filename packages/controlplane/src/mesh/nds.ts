/**
 * NDS: the DNS name table istiod pushes to agents that capture DNS
 * (istio.networking.nds.v1.NameTable, one unnamed resource): every mesh service's hostname
 * with its VIP, as a Kubernetes service (the agent derives `name`, `name.ns`, `name.ns.svc`).
 */
import type { Mesh } from './model.ts';
import type { Json } from './names.ts';

export const NAME_TABLE_TYPE = 'type.googleapis.com/istio.networking.nds.v1.NameTable';

export function nameTable(mesh: Mesh): Json {
  const table: Record<string, Json> = {};
  for (const s of mesh.services) {
    table[s.hostname] = { ips: [s.vip], registry: 'Kubernetes', shortname: s.name, namespace: s.namespace };
  }
  return { '@type': NAME_TABLE_TYPE, table };
}
