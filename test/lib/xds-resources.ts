// xDS resources and probes for the xDS contract tests: listeners that say which listener served
// (x-listener), clusters, config_dump lookups, and crafted Anys (bytes that do not decode, a
// filter whose typed_config names a type nobody knows).
import { TYPE_URL, encodeResource, toPlainMessage, typeForUrl, type AnyBytes } from '../../packages/proxy/src/api/xds.ts';
import { request, run, sleep } from './client.ts';
import type { Json, RunningProxy } from './proxy.ts';
import { T } from './config.ts';

export { TYPE_URL };

/** A fresh ADS config source (callers may set initial_fetch_timeout on it). */
const ads = (): Json => ({ ads: {}, resource_api_version: 'V3' });

export function staticCluster(name: string, port: number): Json {
  return {
    '@type': TYPE_URL.cluster, name, type: 'STATIC', connect_timeout: '1s',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }] },
  };
}

export function edsCluster(name: string): Json {
  return { '@type': TYPE_URL.cluster, name, type: 'EDS', connect_timeout: '1s', eds_cluster_config: { eds_config: ads() } };
}

export function cla(name: string, ports: readonly number[]): Json {
  return { '@type': TYPE_URL.endpoint, cluster_name: name, endpoints: [{ lb_endpoints: ports.map((p) => ({ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: p } } } })) }] };
}

export interface ListenerOpts {
  /** Route to this cluster inline (default 'backend'), or take routes from RDS by this name. */
  readonly cluster?: string;
  readonly rds?: string;
  /** The RDS config source's initial_fetch_timeout ("1s"); unset: Envoy's default 15 s. */
  readonly rdsFetchTimeout?: string;
  /** A network filter placed before the HCM. */
  readonly extraFilter?: Json;
  readonly transportSocket?: Json;
}

/** An HTTP listener whose responses carry `x-listener: <name>`. */
export function httpListener(name: string, port: number, opts: ListenerOpts = {}): Json {
  const vhosts = [{
    name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: opts.cluster ?? 'backend' } }],
    response_headers_to_add: [{ header: { key: 'x-listener', value: name } }],
  }];
  const routes = opts.rds
    ? { rds: { route_config_name: opts.rds, config_source: { ...ads(), ...(opts.rdsFetchTimeout ? { initial_fetch_timeout: opts.rdsFetchTimeout } : {}) } } }
    : { route_config: { name: `${name}-routes`, virtual_hosts: vhosts } };
  const hcm = {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': T.hcm, stat_prefix: name, ...routes,
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
    },
  };
  const chain: Json = { filters: [...(opts.extraFilter ? [opts.extraFilter] : []), hcm] };
  if (opts.transportSocket) chain.transport_socket = opts.transportSocket;
  return { '@type': TYPE_URL.listener, name, address: { socket_address: { address: '127.0.0.1', port_value: port } }, filter_chains: [chain] };
}

/** A RouteConfiguration sending everything to `cluster`, tagging responses `x-route: <tag>`. */
export function routeConfig(name: string, cluster: string, tag = name): Json {
  return {
    '@type': TYPE_URL.route, name,
    virtual_hosts: [{ name: 'all', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster } }], response_headers_to_add: [{ header: { key: 'x-route', value: tag } }] }],
  };
}

export const any = (json: Json): AnyBytes => encodeResource(json);

/** Cluster bytes that do not decode: field 1 (name) with a length far past the end. */
export const UNDECODABLE_CLUSTER: AnyBytes = { type_url: TYPE_URL.cluster, value: Uint8Array.from([0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f]) };

/** `httpListener(name, port)` whose first network filter's typed_config has a type URL no one knows. */
export function listenerWithUnknownFilter(name: string, port: number): AnyBytes {
  const known = httpListener(name, port, { extraFilter: { name: 'acme', typed_config: { '@type': T.router } } });
  const plain = toPlainMessage('envoy.config.listener.v3.Listener', Object.fromEntries(Object.entries(known).filter(([k]) => k !== '@type')));
  const filters = ((plain.filter_chains as Json[])[0].filters as Json[]);
  filters[0].typed_config = { type_url: 'type.googleapis.com/acme.filters.v1.Unknown', value: Uint8Array.from([0x08, 0x01]) };
  const type = typeForUrl(TYPE_URL.listener)!;
  return { type_url: TYPE_URL.listener, value: type.encode(type.fromObject(plain)).finish() };
}

/** Which listener served a request on `port` (its x-listener header), or the error code. */
export async function servedBy(port: number): Promise<string> {
  try {
    const r = await request(`http://127.0.0.1:${port}/who`, { timeoutMs: 3000 });
    return r.status === 200 ? String(r.headers['x-listener'] ?? r.headers['x-route'] ?? '200') : `status ${r.status}`;
  } catch (e) {
    return (e as NodeJS.ErrnoException).code ?? (e as Error).message;
  }
}

/** The listeners that served `n` fresh connections (one request each) on `port`. */
export async function servedBySet(port: number, n: number): Promise<Set<string>> {
  const out = new Set<string>();
  for (let i = 0; i < n; i++) out.add(await servedBy(port));
  return out;
}

/** config_dump?resource=<field>: its entries. */
export async function dumpEntries(proxy: RunningProxy, field: string, query = ''): Promise<Json[]> {
  const r = await proxy.admin(`/config_dump?resource=${field}${query}`);
  return (JSON.parse(r.body) as { configs: Json[] }).configs;
}

export async function dynamicListener(proxy: RunningProxy, name: string): Promise<Json | undefined> {
  return (await dumpEntries(proxy, 'dynamic_listeners')).find((e) => e.name === name);
}

export async function activeCluster(proxy: RunningProxy, name: string): Promise<Json | undefined> {
  return (await dumpEntries(proxy, 'dynamic_active_clusters')).find((e) => (e.cluster as Json | undefined)?.name === name);
}

/** error_state.details of a config_dump entry. */
export function errorDetails(entry: Json | undefined): string | undefined {
  return ((entry?.error_state as Json | undefined)?.details as string | undefined);
}

/** The port a listener entry's active_state binds. */
export function activePort(entry: Json | undefined): number | undefined {
  const l = (entry?.active_state as Json | undefined)?.listener as Json | undefined;
  return ((l?.address as Json | undefined)?.socket_address as Json | undefined)?.port_value as number | undefined;
}

/** Polls `check` (a throw counts as false) until it holds. */
export async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** Listening sockets on a port (one per worker with SO_REUSEPORT). */
export async function listeningSockets(port: number): Promise<number> {
  const out = (await run('ss', ['-Hltn', `sport = :${port}`])).stdout.trim();
  return out === '' ? 0 : out.split('\n').length;
}
