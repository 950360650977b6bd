// Istio's bookinfo sample (../shared/fixtures/istio-istio/samples/bookinfo/networking), translated by
// hand into the Envoy config istiod generates for a sidecar: one outbound RouteConfiguration "9080"
// with a virtual host per service (istiod's domain list), routes from the VirtualService http rules
// (header matches as string_match, weighted_clusters of `outbound|9080|<subset>|<fqdn>` subset clusters,
// fault injection as typed_per_filter_config HTTPFault with MILLION percentages, timeout 0s, istiod's
// default retry_policy, max_grpc_timeout 0s, istio metadata and decorator), istiod's subset clusters
// (LEAST_REQUEST, 10 s connect timeout, unlimited circuit breakers) and the inbound side
// (`inbound|9080||`). The bookinfo apps are node:http servers answering their own name.
//
// Deviations from istiod, all forced by a static bootstrap (no xDS here): route_config inline instead
// of `rds`, STATIC clusters with a load_assignment instead of EDS, the inbound cluster STATIC to the
// app instead of ORIGINAL_DST bound to 127.0.0.6, and the HCM without istiod's fields this build
// refuses (tracing, request_id_extension, normalize_path, forward_client_cert_details, the
// istio.* / cors filters).
import { Agent, createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import type { Json } from './proxy.ts';
import { request } from './client.ts';
import { T, socketAddress } from './config.ts';

export const NAMESPACE = 'default';
export const SERVICE_PORT = 9080;
export const FAULT_FILTER = 'envoy.filters.http.fault';
export const FAULT_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.fault.v3.HTTPFault';
export const INBOUND_CLUSTER = `inbound|${SERVICE_PORT}||`;

/** Made-up ClusterIP VIPs (istiod puts them, with and without port, in the domain list). */
const VIPS: Record<string, string> = { productpage: '10.96.10.11', reviews: '10.96.10.12', ratings: '10.96.10.13', details: '10.96.10.14' };

export function fqdn(service: string): string {
  return `${service}.${NAMESPACE}.svc.cluster.local`;
}

/** `outbound|9080|v1|reviews.default.svc.cluster.local` (subset '' = the whole service). */
export function outboundCluster(service: string, subset = ''): string {
  return `outbound|${SERVICE_PORT}|${subset}|${fqdn(service)}`;
}

/** The RetryPolicy istiod puts on every sidecar route when the VirtualService sets no `retries`. */
export const ISTIO_DEFAULT_RETRY_POLICY: Json = {
  retry_on: 'connect-failure,refused-stream,unavailable,cancelled,retriable-status-codes',
  num_retries: 2,
  retry_host_predicate: [{ name: 'envoy.retry_host_predicates.previous_hosts' }],
  host_selection_retry_max_attempts: '5',
  retriable_status_codes: [503],
};

// ---------------------------------------------------------------- VirtualService (the Istio side)

export interface Destination { readonly subset: string; readonly weight?: number }

export interface HttpFault {
  /** fault.delay: percentage.value and fixedDelay (a proto Duration string, "7s"). */
  readonly delay?: { readonly percent: number; readonly fixedDelay: string };
  /** fault.abort: percentage.value and httpStatus. */
  readonly abort?: { readonly percent: number; readonly httpStatus: number };
}

/** One VirtualService `http` rule: exact header matches (one HTTPMatchRequest), destinations, fault. */
export interface HttpRule {
  readonly headers?: Readonly<Record<string, string>>;
  readonly route: readonly Destination[];
  readonly fault?: HttpFault;
}

export interface VirtualService {
  /** metadata.name */
  readonly name: string;
  /** spec.hosts[0], a short service name in the default namespace. */
  readonly host: string;
  readonly http: readonly HttpRule[];
}

/** The bookinfo VirtualServices used by the tests (virtual-service-*.yaml, fault-injection-details-v1.yaml). */
export const VS = {
  allV1: (service: string): VirtualService => ({ name: service, host: service, http: [{ route: [{ subset: 'v1' }] }] }),
  /** virtual-service-reviews-50-v3.yaml */
  reviews50v3: { name: 'reviews', host: 'reviews', http: [{ route: [{ subset: 'v1', weight: 50 }, { subset: 'v3', weight: 50 }] }] },
  /** virtual-service-reviews-80-20.yaml (Istio's traffic-shifting sample) */
  reviews80v1v2: { name: 'reviews', host: 'reviews', http: [{ route: [{ subset: 'v1', weight: 80 }, { subset: 'v2', weight: 20 }] }] },
  /** virtual-service-reviews-test-v2.yaml: jason → v2, everyone else → v1 */
  reviewsTestV2: { name: 'reviews', host: 'reviews', http: [{ headers: { 'end-user': 'jason' }, route: [{ subset: 'v2' }] }, { route: [{ subset: 'v1' }] }] },
  /** virtual-service-reviews-jason-v2-v3.yaml: jason → v2, everyone else → v3 */
  reviewsJasonV2V3: { name: 'reviews', host: 'reviews', http: [{ headers: { 'end-user': 'jason' }, route: [{ subset: 'v2' }] }, { route: [{ subset: 'v3' }] }] },
  /** virtual-service-ratings-test-delay.yaml (fixedDelay shortened from 7s) */
  ratingsTestDelay: (fixedDelay: string): VirtualService => ({
    name: 'ratings', host: 'ratings',
    http: [{ headers: { 'end-user': 'jason' }, fault: { delay: { percent: 100, fixedDelay } }, route: [{ subset: 'v1' }] }, { route: [{ subset: 'v1' }] }],
  }),
  /** virtual-service-ratings-test-abort.yaml */
  ratingsTestAbort: {
    name: 'ratings', host: 'ratings',
    http: [{ headers: { 'end-user': 'jason' }, fault: { abort: { percent: 100, httpStatus: 500 } }, route: [{ subset: 'v1' }] }, { route: [{ subset: 'v1' }] }],
  },
  /** fault-injection-details-v1.yaml (abort 555 for everyone), with `percent` instead of 100. */
  detailsAbort: (percent: number): VirtualService => ({
    name: 'details', host: 'details',
    http: [{ fault: { abort: { httpStatus: 555, percent } }, route: [{ subset: 'v1' }] }, { route: [{ subset: 'v1' }] }],
  }),
} as const satisfies Record<string, VirtualService | ((...a: never[]) => VirtualService)>;

// ---------------------------------------------------------------- translation (what istiod emits)

export interface TranslateOptions {
  /** Put istiod's default retry_policy on every route (false while this build refuses it). */
  readonly retries: boolean;
}

/** istiod's translatePercentToFractionalPercent: value × 10,000 out of a MILLION. */
function fractionalPercent(percent: number): Json {
  return { numerator: Math.round(percent * 10_000), denominator: 'MILLION' };
}

function translateFault(f: HttpFault): Json {
  return {
    '@type': FAULT_TYPE,
    ...(f.delay ? { delay: { fixed_delay: f.delay.fixedDelay, percentage: fractionalPercent(f.delay.percent) } } : {}),
    ...(f.abort ? { abort: { http_status: f.abort.httpStatus, percentage: fractionalPercent(f.abort.percent) } } : {}),
  };
}

function routeAction(vs: VirtualService, rule: HttpRule, opts: TranslateOptions): Json {
  const target: Json = rule.route.length === 1
    ? { cluster: outboundCluster(vs.host, rule.route[0].subset) }
    : { weighted_clusters: { clusters: rule.route.map((d) => ({ name: outboundCluster(vs.host, d.subset), weight: d.weight ?? 0 })) } };
  return { ...target, timeout: '0s', ...(opts.retries ? { retry_policy: ISTIO_DEFAULT_RETRY_POLICY } : {}), max_grpc_timeout: '0s' };
}

/** One VirtualService http rule → one Envoy route, as istiod's TranslateRoute builds it. */
export function translateRule(vs: VirtualService, rule: HttpRule, opts: TranslateOptions): Json {
  const headers = Object.entries(rule.headers ?? {}).map(([name, exact]) => ({ name, string_match: { exact } }));
  return {
    match: { prefix: '/', ...(headers.length ? { headers } : {}) },
    route: routeAction(vs, rule, opts),
    metadata: { filter_metadata: { istio: { config: `/apis/networking.istio.io/v1alpha3/namespaces/${NAMESPACE}/virtual-service/${vs.name}` } } },
    decorator: { operation: `${fqdn(vs.host)}:${SERVICE_PORT}/*` },
    ...(rule.fault ? { typed_per_filter_config: { [FAULT_FILTER]: translateFault(rule.fault) } } : {}),
  };
}

/** istiod's domain list for a service on a sidecar: FQDN and shorter names, VIP, each with and without port. */
export function serviceDomains(service: string): string[] {
  const names = [fqdn(service), service, `${service}.${NAMESPACE}.svc`, `${service}.${NAMESPACE}`, VIPS[service] ?? '10.96.0.1'];
  return names.flatMap((n) => [n, `${n}:${SERVICE_PORT}`]);
}

export function virtualHost(vs: VirtualService, opts: TranslateOptions): Json {
  return {
    name: `${fqdn(vs.host)}:${SERVICE_PORT}`,
    domains: serviceDomains(vs.host),
    routes: vs.http.map((r) => translateRule(vs, r, opts)),
    include_request_attempt_count: true,
  };
}

/** outboundTrafficPolicy REGISTRY_ONLY: unknown hosts get a 502. */
export const BLOCK_ALL_VHOST: Json = {
  name: 'block_all', domains: ['*'],
  routes: [{ name: 'block_all', match: { prefix: '/' }, direct_response: { status: 502 } }],
  include_request_attempt_count: true,
};

/** The outbound RouteConfiguration "9080" for a set of VirtualServices. */
export function outboundRouteConfig(services: readonly VirtualService[], opts: TranslateOptions): Json {
  return { name: String(SERVICE_PORT), virtual_hosts: [...services.map((v) => virtualHost(v, opts)), BLOCK_ALL_VHOST], validate_clusters: false };
}

/** Every service of bookinfo with the all-v1 VirtualService, except those given. */
export function bookinfoServices(...overrides: VirtualService[]): VirtualService[] {
  return ['productpage', 'reviews', 'ratings', 'details'].map((s) => overrides.find((o) => o.host === s) ?? VS.allV1(s));
}

const STDOUT_LOG: Json = { name: 'envoy.access_loggers.file', typed_config: { '@type': T.stdoutLog } };

/** The sidecar's HTTP connection manager (outbound or inbound), with the empty HTTPFault filter istiod installs. */
export function sidecarHcm(statPrefix: string, routeConfig: Json): Json {
  return {
    name: 'envoy.filters.network.http_connection_manager',
    typed_config: {
      '@type': T.hcm,
      stat_prefix: statPrefix,
      route_config: routeConfig,
      http_filters: [
        { name: FAULT_FILTER, typed_config: { '@type': FAULT_TYPE } },
        { name: 'envoy.filters.http.router', typed_config: { '@type': T.router } },
      ],
      access_log: [STDOUT_LOG],
      use_remote_address: false,
      upgrade_configs: [{ upgrade_type: 'websocket' }],
      stream_idle_timeout: '0s',
    },
  };
}

/** A listener with one sidecar HCM chain (istiod's 0.0.0.0_9080 outbound listener, on loopback). */
export function sidecarListener(name: string, port: number, statPrefix: string, routeConfig: Json): Json {
  return { name, address: socketAddress(port), filter_chains: [{ filters: [sidecarHcm(statPrefix, routeConfig)] }] };
}

/** istiod's outbound subset cluster (EDS there; STATIC here, same endpoints). */
export function subsetCluster(service: string, subset: string, ports: readonly number[]): Json {
  const name = outboundCluster(service, subset);
  return {
    name,
    type: 'STATIC',
    connect_timeout: '10s',
    lb_policy: 'LEAST_REQUEST',
    circuit_breakers: {
      thresholds: [{ max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295, max_retries: 4294967295, track_remaining: true }],
    },
    metadata: {
      filter_metadata: {
        istio: {
          default_original_port: SERVICE_PORT,
          services: [{ host: fqdn(service), namespace: NAMESPACE, name: service }],
          config: `/apis/networking.istio.io/v1alpha3/namespaces/${NAMESPACE}/destination-rule/${service}`,
          subset,
        },
      },
    },
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: ports.map((p) => ({ endpoint: { address: socketAddress(p) }, health_status: 'HEALTHY', load_balancing_weight: 1 })) }],
    },
  };
}

/** The inbound side of a pod's sidecar: route config `inbound|9080||` → the app. */
export function inboundRouteConfig(service: string): Json {
  return {
    name: INBOUND_CLUSTER,
    virtual_hosts: [{
      name: `inbound|http|${SERVICE_PORT}`,
      domains: ['*'],
      routes: [{
        name: 'default',
        match: { prefix: '/' },
        route: { cluster: INBOUND_CLUSTER, timeout: '0s', max_grpc_timeout: '0s' },
        decorator: { operation: `${fqdn(service)}:${SERVICE_PORT}/*` },
      }],
    }],
    validate_clusters: false,
  };
}

/** `inbound|9080||` (ORIGINAL_DST to the app in istiod; STATIC to the app's port here). */
export function inboundCluster(appPort: number): Json {
  return {
    name: INBOUND_CLUSTER,
    type: 'STATIC',
    connect_timeout: '10s',
    lb_policy: 'ROUND_ROBIN',
    circuit_breakers: { thresholds: [{ max_connections: 4294967295, max_pending_requests: 4294967295, max_requests: 4294967295, max_retries: 4294967295, track_remaining: true }] },
    load_assignment: { cluster_name: INBOUND_CLUSTER, endpoints: [{ lb_endpoints: [{ endpoint: { address: socketAddress(appPort) } }] }] },
  };
}

// ---------------------------------------------------------------- the bookinfo apps

export interface SeenRequest { readonly url: string; readonly headers: IncomingHttpHeaders }

export interface App {
  readonly name: string;
  readonly port: number;
  readonly seen: SeenRequest[];
  close(): Promise<void>;
}

function listenApp(name: string, server: Server, seen: SeenRequest[]): Promise<App> {
  const sockets = new Set<Socket>();
  server.unref();
  server.keepAliveTimeout = 60_000;
  server.on('connection', (s: Socket) => { s.unref(); sockets.add(s); s.once('close', () => sockets.delete(s)); });
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve({
      name, port: (server.address() as AddressInfo).port, seen,
      close: () => new Promise<void>((r) => { for (const s of sockets) s.destroy(); server.close(() => r()); }),
    }));
  });
}

/** A bookinfo workload (e.g. "reviews-v2"): answers 200 text/plain with its own name. */
export function startApp(name: string): Promise<App> {
  const seen: SeenRequest[] = [];
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(name)) });
      res.end(name);
    });
  });
  return listenApp(name, server, seen);
}

/** Headers bookinfo's productpage forwards to reviews (request id, B3/W3C tracing, end-user). */
const PROPAGATED = ['x-request-id', 'end-user', 'user-agent', 'traceparent', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-sampled'];

/**
 * productpage-v1: on any request, calls `http://reviews:9080/reviews/0` through its sidecar's
 * outbound listener (`outboundPort`), forwarding the propagated headers, and answers
 * `productpage-v1 -> <reviews status> <reviews body>`.
 */
export function startProductpage(outboundPort: () => number): Promise<App> {
  const seen: SeenRequest[] = [];
  const agent = new Agent({ keepAlive: true, maxSockets: 16 });
  const server = createServer((req, res) => {
    seen.push({ url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => {
      const headers: Record<string, string> = { host: `reviews:${SERVICE_PORT}` };
      for (const h of PROPAGATED) { const v = req.headers[h]; if (typeof v === 'string') headers[h] = v; }
      request(`http://127.0.0.1:${outboundPort()}/reviews/0`, { headers, agent }).then((r) => {
        const body = `productpage-v1 -> ${r.status} ${r.text}`;
        res.writeHead(200, { 'content-type': 'text/plain', 'content-length': String(Buffer.byteLength(body)) });
        res.end(body);
      }, (err: Error) => {
        res.writeHead(502, { 'content-type': 'text/plain' });
        res.end(`productpage-v1 -> error ${err.message}`);
      });
    });
  });
  server.once('close', () => agent.destroy());
  return listenApp('productpage-v1', server, seen);
}

// ---------------------------------------------------------------- load and statistics

export interface Tally {
  readonly bodies: Map<string, number>;
  readonly statuses: Map<number, number>;
  readonly ms: number;
}

/** `n` GETs of `url` over `concurrency` keep-alive connections; counts bodies and statuses. */
export async function tally(url: string, n: number, opts: { headers?: Record<string, string>; concurrency?: number } = {}): Promise<Tally> {
  const concurrency = opts.concurrency ?? 16;
  const agent = new Agent({ keepAlive: true, maxSockets: concurrency });
  const bodies = new Map<string, number>(), statuses = new Map<number, number>();
  let next = 0;
  const t0 = performance.now();
  const worker = async (): Promise<void> => {
    while (next < n) {
      next++;
      const r = await request(url, { headers: opts.headers, agent });
      bodies.set(r.text, (bodies.get(r.text) ?? 0) + 1);
      statuses.set(r.status, (statuses.get(r.status) ?? 0) + 1);
    }
  };
  try {
    await Promise.all(Array.from({ length: concurrency }, worker));
  } finally {
    agent.destroy();
  }
  return { bodies, statuses, ms: performance.now() - t0 };
}

/**
 * Acceptance interval for a count of successes in `n` Bernoulli(p) trials: n·p ± k·σ with
 * σ = √(n·p·(1−p)). k = 4 makes a false failure a ~1-in-15,000 event.
 */
export function binomialBounds(n: number, p: number, k = 4): { lo: number; hi: number; sigma: number } {
  const sigma = Math.sqrt(n * p * (1 - p));
  return { lo: Math.floor(n * p - k * sigma), hi: Math.ceil(n * p + k * sigma), sigma };
}
