import { createRequire } from 'node:module';
import type { NetworkFilterExtension } from './types.ts';
import { lazyExtensionTables, type LazyExtension } from '../lazy-extensions.ts';
import { registerNetworkTerminal, type NetworkTerminalExtension } from '../../listener/terminal.ts';

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

/**
 * A terminal whose module (HCM: the whole HTTP stack; tcp_proxy: the upstream pools) loads when a
 * config first uses it, as the filters above do: a listener of other terminals (ztunnel's) never loads them.
 */
function lazyTerminal(typeUrl: string, legacyName: string, load: () => NetworkTerminalExtension): NetworkTerminalExtension {
  let ext: NetworkTerminalExtension | undefined;
  return { typeUrl, legacyName, compile: (m) => (ext ??= load()).compile(m) };
}

export const NETWORK_TERMINAL_ENTRIES: readonly NetworkTerminalExtension[] = [
  lazyTerminal(`${T}envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager`, 'envoy.filters.network.http_connection_manager',
    () => (require('./http_connection_manager/terminal.ts') as typeof import('./http_connection_manager/terminal.ts')).HCM_TERMINAL),
  lazyTerminal(`${T}envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy`, 'envoy.filters.network.tcp_proxy',
    () => (require('./tcp_proxy/terminal.ts') as typeof import('./tcp_proxy/terminal.ts')).TCP_PROXY_TERMINAL),
];
for (const t of NETWORK_TERMINAL_ENTRIES) registerNetworkTerminal(t);
