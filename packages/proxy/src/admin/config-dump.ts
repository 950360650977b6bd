import type { ProxyServer } from '../server.ts';
import { dynamicClusters, dynamicEndpoints, dynamicListeners, dynamicRoutes, dynamicSecrets, ecdsFilters } from '../xds/dump.ts';

const T = 'type.googleapis.com/envoy.admin.v3.';
const LISTENER = 'type.googleapis.com/envoy.config.listener.v3.Listener';
const CLUSTER = 'type.googleapis.com/envoy.config.cluster.v3.Cluster';
const ROUTE = 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration';
const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';

type Json = Record<string, unknown>;

/** Inline route configs of a listener's HCMs, as Envoy lists them under static_route_configs. */
function inlineRoutes(listener: Json): Json[] {
  const out: Json[] = [];
  const chains = [...((listener.filter_chains as Json[]) ?? []), ...(listener.default_filter_chain ? [listener.default_filter_chain as Json] : [])];
  for (const chain of chains) {
    for (const f of (chain.filters as Json[]) ?? []) {
      const tc = f.typed_config as Json | undefined;
      if (tc?.['@type'] === HCM && tc.route_config) out.push(tc.route_config as Json);
    }
  }
  return out;
}

/**
 * Envoy's /config_dump: one entry per config tracker (bootstrap, clusters,
 * listeners, routes, secrets), each with `@type` and `last_updated`, as
 * istioctl proxy-config reads it.
 */
export function configDump(server: ProxyServer, resource: string | undefined, includeEds = false): Json {
  const updated = new Date(server.loadedAt).toISOString();
  const boot = server.bootstrap;
  const d = server.dynamic;
  const clusters = d ? dynamicClusters(d) : undefined;
  const configs: Json[] = [
    { '@type': T + 'BootstrapConfigDump', bootstrap: boot.source, last_updated: updated },
    {
      '@type': T + 'ClustersConfigDump', static_clusters: boot.clusters.map((c) => ({ cluster: { '@type': CLUSTER, ...c.source }, last_updated: updated })),
      ...(clusters ? { dynamic_active_clusters: clusters.active, dynamic_warming_clusters: clusters.warming } : {}),
    },
    {
      '@type': T + 'ListenersConfigDump', static_listeners: boot.listeners.map((l) => ({ listener: { '@type': LISTENER, ...l.source }, last_updated: updated })),
      ...(d ? { dynamic_listeners: dynamicListeners(d) } : {}),
    },
    {
      '@type': T + 'RoutesConfigDump', static_route_configs: boot.listeners.flatMap((l) => inlineRoutes(l.source)).map((r) => ({ route_config: { '@type': ROUTE, ...r }, last_updated: updated })),
      ...(d ? { dynamic_route_configs: dynamicRoutes(d) } : {}),
    },
    { '@type': T + 'SecretsConfigDump', ...(d ? { dynamic_active_secrets: dynamicSecrets(d) } : {}) },
  ];
  if (d && d.extensions.size) configs.splice(1, 0, { '@type': T + 'EcdsConfigDump', ecds_filters: ecdsFilters(d) });
  if (includeEds) configs.push({ '@type': T + 'EndpointsConfigDump', ...(d ? { dynamic_endpoint_configs: dynamicEndpoints(d) } : {}) });
  if (!resource) return { configs };
  // ?resource=<repeated field>: the elements of that field across the dump, each typed as Envoy does.
  const items: Json[] = [];
  for (const c of configs) {
    const v = c[resource];
    if (Array.isArray(v)) for (const e of v) items.push({ '@type': `${c['@type']}.${resourceType(resource)}`, ...e });
  }
  return { configs: items };
}

function resourceType(field: string): string {
  switch (field) {
    case 'static_clusters': return 'StaticCluster';
    case 'static_listeners': return 'StaticListener';
    case 'static_route_configs': return 'StaticRouteConfig';
    case 'dynamic_listeners': return 'DynamicListener';
    case 'dynamic_active_clusters': case 'dynamic_warming_clusters': return 'DynamicCluster';
    case 'dynamic_route_configs': return 'DynamicRouteConfig';
    case 'dynamic_endpoint_configs': return 'DynamicEndpointConfig';
    case 'dynamic_active_secrets': return 'DynamicSecret';
    case 'ecds_filters': return 'EcdsFilterConfig';
    default: return field;
  }
}
