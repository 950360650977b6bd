import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { compileBootstrap, loadBootstrapSource, type BootstrapConfig } from '../src/config/bootstrap.ts';
import { ConfigError } from '../src/core/errors.ts';

type Json = Record<string, any>;

const HCM = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const ROUTER = 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router';
const TCP = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';

const dir = mkdtempSync(join(tmpdir(), 'skua-bootstrap-'));
after(() => rmSync(dir, { recursive: true, force: true }));
let fileNo = 0;
function file(text: string, ext = '.yaml'): string {
  const p = join(dir, `b${fileNo++}${ext}`);
  writeFileSync(p, text);
  return p;
}

const SNAKE_YAML = `
node: { id: sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local, cluster: pod.ns, metadata: { ISTIO_VERSION: "1.24", someCamelKey: kept } }
admin:
  address: { socket_address: { address: 127.0.0.1, port_value: 9901 } }
static_resources:
  listeners:
  - name: ingress
    address: { socket_address: { address: 0.0.0.0, port_value: 10000 } }
    filter_chains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typed_config:
          "@type": ${HCM}
          stat_prefix: ingress_http
          route_config:
            virtual_hosts:
            - name: vh
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backend }
          http_filters:
          - name: envoy.filters.http.router
            typed_config: { "@type": ${ROUTER} }
  clusters:
  - name: backend
    type: STATIC
    lb_policy: LEAST_REQUEST
    connect_timeout: 0.25s
    load_assignment:
      cluster_name: backend
      endpoints:
      - lb_endpoints:
        - endpoint: { address: { socket_address: { address: 127.0.0.1, port_value: 8080 } } }
          load_balancing_weight: 3
`;

const CAMEL_YAML = `
node: { id: sidecar~10.0.0.1~pod.ns~ns.svc.cluster.local, cluster: pod.ns, metadata: { ISTIO_VERSION: "1.24", someCamelKey: kept } }
admin:
  address: { socketAddress: { address: 127.0.0.1, portValue: 9901 } }
staticResources:
  listeners:
  - name: ingress
    address: { socketAddress: { address: 0.0.0.0, portValue: 10000 } }
    filterChains:
    - filters:
      - name: envoy.filters.network.http_connection_manager
        typedConfig:
          "@type": ${HCM}
          statPrefix: ingress_http
          routeConfig:
            virtualHosts:
            - name: vh
              domains: ["*"]
              routes:
              - match: { prefix: "/" }
                route: { cluster: backend }
          httpFilters:
          - name: envoy.filters.http.router
            typedConfig: { "@type": ${ROUTER} }
  clusters:
  - name: backend
    type: STATIC
    lbPolicy: LEAST_REQUEST
    connectTimeout: 0.25s
    loadAssignment:
      clusterName: backend
      endpoints:
      - lbEndpoints:
        - endpoint: { address: { socketAddress: { address: 127.0.0.1, portValue: 8080 } } }
          loadBalancingWeight: 3
`;

/** A compiled bootstrap reduced to plain data that deepEqual can compare. */
function summary(b: BootstrapConfig): Json {
  return {
    node: b.node,
    admin: b.admin,
    listeners: b.listeners.map((l) => ({ name: l.name, address: l.address, statPrefix: l.statPrefix, chains: l.chainCount })),
    clusters: b.clusters.map((c) => ({ name: c.name, type: c.type, lb: c.lbPolicy, timeout: c.connectTimeoutMs, endpoints: c.endpoints })),
  };
}

/** A bootstrap object with one HCM listener (routes to `routeCluster`) and the given clusters. */
function boot(opts: { routeCluster?: string; clusters?: string[]; listeners?: Json[]; extra?: Json } = {}): Json {
  const cluster = (name: string): Json => ({
    name, type: 'STATIC',
    load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: 8080 } } } }] }] },
  });
  return {
    static_resources: {
      listeners: opts.listeners ?? [listener('l0', opts.routeCluster ?? 'backend')],
      clusters: (opts.clusters ?? ['backend']).map(cluster),
    },
    ...opts.extra,
  };
}

function hcm(routeCluster: string, extra: Json = {}): Json {
  return {
    '@type': HCM, stat_prefix: 'http',
    route_config: { virtual_hosts: [{ name: 'vh', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: routeCluster } }] }] },
    http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': ROUTER } }],
    ...extra,
  };
}

function listener(name: string, routeCluster: string, port = 10000, typedConfig?: Json): Json {
  return {
    name,
    address: { socket_address: { address: '127.0.0.1', port_value: port } },
    filter_chains: [{ filters: [{ name: 'hcm', typed_config: typedConfig ?? hcm(routeCluster) }] }],
  };
}

function configError(raw: Json, path: string, message?: RegExp): void {
  assert.throws(() => compileBootstrap(raw), (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.path, path);
    if (message) assert.match(err.message, message);
    return true;
  });
}

describe('loadBootstrapSource', () => {
  test('camelCase and snake_case give the same source and the same compiled config', () => {
    const snake = loadBootstrapSource(file(SNAKE_YAML), undefined);
    const camel = loadBootstrapSource(file(CAMEL_YAML), undefined);
    assert.deepEqual(camel, snake);
    const a = summary(compileBootstrap(snake));
    assert.deepEqual(summary(compileBootstrap(camel)), a);
    assert.equal(a.listeners[0].address.port, 10000);
    assert.equal(a.clusters[0].lb, 'LEAST_REQUEST');
    assert.equal(a.clusters[0].timeout, 250);
    assert.equal(a.clusters[0].endpoints[0].weight, 3);
    assert.deepEqual(a.admin, { address: { address: '127.0.0.1', port: 9901, isName: false } });
  });
  test('Struct keys (node metadata) and @type keep their spelling', () => {
    const src = loadBootstrapSource(file(CAMEL_YAML), undefined) as Json;
    assert.deepEqual(src.node.metadata, { ISTIO_VERSION: '1.24', someCamelKey: 'kept' });
    assert.equal(src.static_resources.listeners[0].filter_chains[0].filters[0].typed_config['@type'], HCM);
    assert.equal(compileBootstrap(src).node.metadata.someCamelKey, 'kept');
  });
  test('JSON input (.json file and JSON text) gives the same result as YAML', () => {
    const fromYaml = loadBootstrapSource(file(SNAKE_YAML), undefined);
    assert.deepEqual(loadBootstrapSource(file(JSON.stringify(fromYaml), '.json'), undefined), fromYaml);
    assert.deepEqual(loadBootstrapSource(undefined, JSON.stringify(fromYaml)), fromYaml);
  });
  test('--config-yaml alone is enough', () => {
    const src = loadBootstrapSource(undefined, 'node: { id: n1, cluster: c1 }');
    assert.deepEqual(compileBootstrap(src).node, { id: 'n1', cluster: 'c1', metadata: {}, locality: {} });
  });
  test('--config-yaml merges over the file: messages merge, repeated fields append, scalars replace', () => {
    const base = file(JSON.stringify(boot({ extra: { node: { id: 'from-file', cluster: 'c' } } })));
    const overlay = JSON.stringify({
      node: { id: 'from-flag' },
      static_resources: { clusters: [{ name: 'extra', type: 'STATIC', load_assignment: { endpoints: [] } }] },
    });
    const src = loadBootstrapSource(base, overlay) as Json;
    assert.equal(src.node.id, 'from-flag');
    assert.equal(src.node.cluster, 'c');
    assert.deepEqual(src.static_resources.clusters.map((c: Json) => c.name), ['backend', 'extra']);
    assert.equal(src.static_resources.listeners.length, 1);
    assert.deepEqual(compileBootstrap(src).clusters.map((c) => c.name), ['backend', 'extra']);
  });
  // Regression (fixed in src/config/bootstrap.ts loadBootstrapSource): the file and --config-yaml are merged before
  // the keys are normalised, so `staticResources` in the flag and `static_resources` in the file are
  // different keys, and normalising lets the later one replace the earlier one (listeners and
  // clusters from the file are lost). Envoy parses each into the proto first, then MergeFrom.
  test('--config-yaml in camelCase merges over a snake_case file', () => {
    const base = file(JSON.stringify(boot()));
    const src = loadBootstrapSource(base, JSON.stringify({ staticResources: { clusters: [{ name: 'extra', type: 'STATIC', loadAssignment: { endpoints: [] } }] } })) as Json;
    assert.deepEqual(src.static_resources.clusters.map((c: Json) => c.name), ['backend', 'extra']);
    assert.equal(src.static_resources.listeners.length, 1);
  });
  test('no configuration at all is an error', () => {
    assert.throws(() => loadBootstrapSource(undefined, undefined), (err: unknown) => err instanceof ConfigError && /no configuration/.test(err.message));
  });
  test('unreadable and unparsable files are ConfigErrors naming the file', () => {
    const missing = join(dir, 'does-not-exist.yaml');
    assert.throws(() => loadBootstrapSource(missing, undefined), (err: unknown) => err instanceof ConfigError && err.message.includes(missing));
    const broken = file('static_resources: [unclosed');
    assert.throws(() => loadBootstrapSource(broken, undefined), (err: unknown) => err instanceof ConfigError && err.message.includes(broken) && /cannot parse/.test(err.message));
    const badJson = file('{"a": }', '.json');
    assert.throws(() => loadBootstrapSource(badJson, undefined), (err: unknown) => err instanceof ConfigError && err.message.includes(badJson));
    assert.throws(() => loadBootstrapSource(undefined, 'a: [1'), (err: unknown) => err instanceof ConfigError && err.message.includes('--config-yaml'));
  });
  test('a bootstrap that is not an object is refused', () => {
    assert.throws(() => loadBootstrapSource(file('- 1\n- 2\n'), undefined), ConfigError);
    assert.throws(() => loadBootstrapSource(undefined, '42'), ConfigError);
  });
});

describe('compileBootstrap: accepted input', () => {
  test('a minimal HCM + cluster bootstrap compiles', () => {
    const b = compileBootstrap(boot());
    assert.deepEqual(b.listeners.map((l) => l.name), ['l0']);
    assert.deepEqual(b.clusters.map((c) => c.name), ['backend']);
    assert.equal(b.admin, undefined);
    assert.deepEqual(b.node, { id: '', cluster: '', metadata: {}, locality: {} });
  });
  test('accepted no-op top-level fields do not fail', () => {
    compileBootstrap(boot({ extra: { layered_runtime: { layers: [] }, stats_config: {}, overload_manager: {}, cluster_manager: {} } }));
  });
  test('validate_clusters: false skips the route cluster check', () => {
    const l = listener('l0', 'x', 10000, hcm('not-a-cluster', { route_config: { validate_clusters: false, virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'not-a-cluster' } }] }] } }));
    assert.equal(compileBootstrap(boot({ listeners: [l] })).listeners.length, 1);
  });
  test('an optional unsupported HTTP filter is skipped', () => {
    const h = hcm('backend', { http_filters: [{ name: 'cors', is_optional: true, typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.cors.v3.Cors' } }, { name: 'router', typed_config: { '@type': ROUTER } }] });
    assert.equal(compileBootstrap(boot({ listeners: [listener('l0', 'backend', 10000, h)] })).listeners.length, 1);
  });
});

describe('compileBootstrap: errors name the field', () => {
  const L0 = 'static_resources.listeners[0]';
  const F0 = `${L0}.filter_chains[0].filters[0]`;
  test('unknown top-level field', () => configError(boot({ extra: { no_such_field: 1 } }), 'no_such_field', /unknown field of envoy\.config\.bootstrap\.v3\.Bootstrap/));
  test('a Bootstrap field Skua does not implement stays "not supported"', () => configError(boot({ extra: { hds_config: {} } }), 'hds_config', /not supported/));
  test('dynamic_resources without a gRPC service', () => configError(boot({ extra: { dynamic_resources: { ads_config: {} } } }), 'dynamic_resources.ads_config.grpc_services', /exactly one/));
  test('dynamic_resources naming an unknown ADS cluster', () => {
    const ads = { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] };
    configError(boot({ extra: { dynamic_resources: { ads_config: ads, lds_config: { ads: {} } } } }), 'dynamic_resources.ads_config.grpc_services[0].envoy_grpc.cluster_name', /unknown cluster 'xds-grpc'/);
  });
  test('dynamic_resources from files (path_config_source) are refused by name', () => {
    const ads = { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'backend' } }] };
    configError(boot({ extra: { dynamic_resources: { ads_config: ads, lds_config: { path_config_source: { path: '/x' } } } } }), 'dynamic_resources.lds_config', /ads/);
  });
  test('static secrets', () => configError({ static_resources: { secrets: [{ name: 's' }] } }, 'static_resources.secrets'));
  test('unknown cluster referenced by a route', () => {
    configError(boot({ routeCluster: 'nope' }), `${F0}.typed_config.route_config.virtual_hosts[0].routes[0].route.cluster`, /unknown cluster 'nope'/);
  });
  test('unknown cluster referenced by a weighted cluster', () => {
    const h = hcm('x', { route_config: { virtual_hosts: [{ name: 'v', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { weighted_clusters: { clusters: [{ name: 'backend', weight: 1 }, { name: 'ghost', weight: 1 }] } } }] }] } });
    configError(boot({ listeners: [listener('l0', 'x', 10000, h)] }), `${F0}.typed_config.route_config.virtual_hosts[0].routes[0].route.weighted_clusters.clusters[1].name`, /ghost/);
  });
  test('unknown cluster referenced by tcp_proxy', () => {
    configError(boot({ listeners: [listener('l0', 'x', 10000, { '@type': TCP, stat_prefix: 'tcp', cluster: 'ghost' })] }), `${F0}.typed_config.cluster`, /unknown cluster 'ghost'/);
  });
  test('duplicate listener names', () => {
    configError(boot({ listeners: [listener('same', 'backend', 10000), listener('same', 'backend', 10001)] }), 'static_resources.listeners[1].name', /duplicate listener same/);
  });
  test('duplicate cluster names', () => {
    configError(boot({ clusters: ['backend', 'other', 'backend'] }), 'static_resources.clusters[2].name', /duplicate cluster backend/);
  });
  test('unsupported network filter type URL', () => {
    const url = 'type.googleapis.com/envoy.extensions.filters.network.redis_proxy.v3.RedisProxy';
    configError(boot({ listeners: [listener('l0', 'x', 10000, { '@type': url, stat_prefix: 'r' })] }), `${F0}.typed_config`, new RegExp(url.replace(/\./g, '\\.')));
  });
  test('unsupported HTTP filter type URL', () => {
    const url = 'type.googleapis.com/envoy.extensions.filters.http.local_ratelimit.v3.LocalRateLimit';
    const h = hcm('backend', { http_filters: [{ name: 'authz', typed_config: { '@type': url } }, { name: 'router', typed_config: { '@type': ROUTER } }] });
    configError(boot({ listeners: [listener('l0', 'backend', 10000, h)] }), `${F0}.typed_config.http_filters[0].typed_config`, new RegExp(url.replace(/\./g, '\\.')));
  });
  test('unsupported listener filter type URL', () => {
    const url = 'type.googleapis.com/envoy.extensions.filters.listener.proxy_protocol.v3.ProxyProtocol';
    const l = { ...listener('l0', 'backend'), listener_filters: [{ name: 'pp', typed_config: { '@type': url } }] };
    configError(boot({ listeners: [l] }), `${L0}.listener_filters[0].typed_config`, new RegExp(url.replace(/\./g, '\\.')));
  });
  test('unsupported transport socket type URL on a cluster', () => {
    const url = 'type.googleapis.com/envoy.extensions.transport_sockets.alts.v3.Alts';
    const b = boot();
    b.static_resources.clusters[0].transport_socket = { name: 'alts', typed_config: { '@type': url } };
    configError(b, 'static_resources.clusters[0].transport_socket.typed_config', new RegExp(url.replace(/\./g, '\\.')));
  });
  test('unsupported access logger type URL', () => {
    const url = 'type.googleapis.com/envoy.extensions.access_loggers.open_telemetry.v3.OpenTelemetryAccessLogConfig';
    const h = hcm('backend', { access_log: [{ name: 'otel', typed_config: { '@type': url } }] });
    configError(boot({ listeners: [listener('l0', 'backend', 10000, h)] }), `${F0}.typed_config.access_log[0].typed_config.@type`, /open_telemetry/);
  });
  test('unsupported cluster lb_policy; EDS clusters take no load_assignment', () => {
    const b = boot();
    b.static_resources.clusters[0].lb_policy = 'LOAD_BALANCING_POLICY_CONFIG';
    configError(b, 'static_resources.clusters[0].lb_policy', /LOAD_BALANCING_POLICY_CONFIG/);
    const e = boot();
    e.static_resources.clusters[0].type = 'EDS';
    configError(e, 'static_resources.clusters[0].load_assignment', /EDS/);
  });
  test('errors inside camelCase input name the snake_case path', () => {
    const src = loadBootstrapSource(undefined, CAMEL_YAML.replace('cluster: backend }', 'cluster: missing }'));
    configError(src, `${F0}.typed_config.route_config.virtual_hosts[0].routes[0].route.cluster`, /missing/);
  });
});
