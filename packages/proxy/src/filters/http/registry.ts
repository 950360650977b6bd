import { createRequire } from 'node:module';
import type { HttpFilterExtension } from './types.ts';
import { lazyExtensionTables, type LazyExtension } from '../lazy-extensions.ts';

// Filter modules load on first use (see lazy-extensions.ts): the keys are repeated here so that looking
// one up does not load the others; test/load-on-use.test.ts checks them against the modules.
const require = createRequire(import.meta.url);
const T = 'type.googleapis.com/';

/** HTTP filters by type URL (the router is handled by the HCM itself). */
export const HTTP_FILTER_ENTRIES: readonly LazyExtension<HttpFilterExtension>[] = [
  { typeUrl: `${T}envoy.extensions.filters.http.fault.v3.HTTPFault`, legacyName: 'envoy.filters.http.fault',
    load: () => (require('./fault/config.ts') as typeof import('./fault/config.ts')).FAULT_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.cors.v3.Cors`, legacyName: 'envoy.filters.http.cors',
    load: () => (require('./cors/config.ts') as typeof import('./cors/config.ts')).CORS_EXTENSION },
  { typeUrl: `${T}stats.PluginConfig`, legacyName: 'istio.stats',
    load: () => (require('./istio_stats/filter.ts') as typeof import('./istio_stats/filter.ts')).ISTIO_STATS_HTTP_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.wasm.v3.Wasm`, legacyName: 'envoy.filters.http.wasm',
    load: () => (require('./metadata_exchange/config.ts') as typeof import('./metadata_exchange/config.ts')).WASM_EXTENSION },
  { typeUrl: `${T}istio.envoy.config.filter.http.alpn.v2alpha1.FilterConfig`, legacyName: 'istio.alpn',
    load: () => (require('./alpn/config.ts') as typeof import('./alpn/config.ts')).ALPN_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.grpc_stats.v3.FilterConfig`, legacyName: 'envoy.filters.http.grpc_stats',
    load: () => (require('./grpc_stats/filter.ts') as typeof import('./grpc_stats/filter.ts')).GRPC_STATS_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.rbac.v3.RBAC`, legacyName: 'envoy.filters.http.rbac',
    load: () => (require('./rbac/config.ts') as typeof import('./rbac/config.ts')).HTTP_RBAC_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.jwt_authn.v3.JwtAuthentication`, legacyName: 'envoy.filters.http.jwt_authn',
    load: () => (require('./jwt_authn/config.ts') as typeof import('./jwt_authn/config.ts')).JWT_AUTHN_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.set_filter_state.v3.Config`, legacyName: 'envoy.filters.http.set_filter_state',
    load: () => (require('./set_filter_state/config.ts') as typeof import('./set_filter_state/config.ts')).HTTP_SET_FILTER_STATE_EXTENSION },
  { typeUrl: `${T}io.istio.http.connect_authority.Config`, legacyName: 'io.istio.http.connect_authority',
    load: () => (require('./connect_authority/config.ts') as typeof import('./connect_authority/config.ts')).CONNECT_AUTHORITY_EXTENSION },
  { typeUrl: `${T}io.istio.http.connect_baggage.Config`, legacyName: 'io.istio.http.connect_baggage',
    load: () => (require('./connect_baggage/config.ts') as typeof import('./connect_baggage/config.ts')).CONNECT_BAGGAGE_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.ext_authz.v3.ExtAuthz`, legacyName: 'envoy.filters.http.ext_authz',
    load: () => (require('./ext_authz/config.ts') as typeof import('./ext_authz/config.ts')).EXT_AUTHZ_EXTENSION },
  { typeUrl: `${T}io.istio.http.peer_metadata.Config`, legacyName: 'io.istio.http.peer_metadata',
    load: () => (require('./peer_metadata/config.ts') as typeof import('./peer_metadata/config.ts')).PEER_METADATA_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.http.compressor.v3.Compressor`, legacyName: 'envoy.filters.http.compressor',
    load: () => (require('./compressor/config.ts') as typeof import('./compressor/config.ts')).COMPRESSOR_EXTENSION },
];

const tables = lazyExtensionTables(HTTP_FILTER_ENTRIES);
export const HTTP_FILTERS_BY_URL = tables.byUrl;
export const HTTP_FILTERS_BY_NAME = tables.byName;
