import type { NetworkFilterExtension } from './types.ts';
import { ISTIO_STATS_NETWORK_EXTENSION } from './istio_stats/filter.ts';
import { MX_NETWORK_EXTENSION } from './metadata_exchange/filter.ts';
import { NETWORK_RBAC_EXTENSION } from './rbac/config.ts';
import { ISTIO_AUTHN_EXTENSION } from './istio_authn/config.ts';
import { NETWORK_SET_FILTER_STATE_EXTENSION } from './set_filter_state/config.ts';
import { registerNetworkTerminal } from '../../listener/terminal.ts';
import { HCM_TERMINAL } from './http_connection_manager/terminal.ts';
import { TCP_PROXY_TERMINAL } from './tcp_proxy/terminal.ts';

/** Non-terminal network filters by type URL (terminals register below: the listener never names them). */
const EXTENSIONS: readonly NetworkFilterExtension[] = [ISTIO_STATS_NETWORK_EXTENSION, MX_NETWORK_EXTENSION, NETWORK_RBAC_EXTENSION, ISTIO_AUTHN_EXTENSION,
  NETWORK_SET_FILTER_STATE_EXTENSION];

export const NETWORK_FILTERS_BY_URL: ReadonlyMap<string, NetworkFilterExtension> = new Map(EXTENSIONS.map((e) => [e.typeUrl, e]));
export const NETWORK_FILTERS_BY_NAME: ReadonlyMap<string, NetworkFilterExtension> = new Map(EXTENSIONS.map((e) => [e.legacyName, e]));

registerNetworkTerminal(HCM_TERMINAL);
registerNetworkTerminal(TCP_PROXY_TERMINAL);
