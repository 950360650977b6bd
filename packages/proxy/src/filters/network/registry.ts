import { createRequire } from 'node:module';
import type { NetworkFilterExtension } from './types.ts';
import { lazyExtensionTables, type LazyExtension } from '../lazy-extensions.ts';
import { registerNetworkTerminal } from '../../listener/terminal.ts';
import { HCM_TERMINAL } from './http_connection_manager/terminal.ts';
import { TCP_PROXY_TERMINAL } from './tcp_proxy/terminal.ts';

// Filter modules load on first use (see lazy-extensions.ts): the keys are repeated here so that looking
// one up does not load the others; test/load-on-use.test.ts checks them against the modules.
const require = createRequire(import.meta.url);
const T = 'type.googleapis.com/';

/** Non-terminal network filters by type URL (terminals register below: the listener never names them). */
export const NETWORK_FILTER_ENTRIES: readonly LazyExtension<NetworkFilterExtension>[] = [
  { typeUrl: `${T}stats.PluginConfig`, legacyName: 'istio.stats',
    load: () => (require('./istio_stats/filter.ts') as typeof import('./istio_stats/filter.ts')).ISTIO_STATS_NETWORK_EXTENSION },
  { typeUrl: `${T}envoy.tcp.metadataexchange.config.MetadataExchange`, legacyName: 'istio.metadata_exchange',
    load: () => (require('./metadata_exchange/filter.ts') as typeof import('./metadata_exchange/filter.ts')).MX_NETWORK_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.network.rbac.v3.RBAC`, legacyName: 'envoy.filters.network.rbac',
    load: () => (require('./rbac/config.ts') as typeof import('./rbac/config.ts')).NETWORK_RBAC_EXTENSION },
  { typeUrl: `${T}io.istio.network.authn.Config`, legacyName: 'io.istio.network.authn',
    load: () => (require('./istio_authn/config.ts') as typeof import('./istio_authn/config.ts')).ISTIO_AUTHN_EXTENSION },
  { typeUrl: `${T}envoy.extensions.filters.network.set_filter_state.v3.Config`, legacyName: 'envoy.filters.network.set_filter_state',
    load: () => (require('./set_filter_state/config.ts') as typeof import('./set_filter_state/config.ts')).NETWORK_SET_FILTER_STATE_EXTENSION },
];

const tables = lazyExtensionTables(NETWORK_FILTER_ENTRIES);
export const NETWORK_FILTERS_BY_URL = tables.byUrl;
export const NETWORK_FILTERS_BY_NAME = tables.byName;

registerNetworkTerminal(HCM_TERMINAL);
registerNetworkTerminal(TCP_PROXY_TERMINAL);
