import type { Msg } from '../../../config/fields.ts';
import type { NetworkFilterExtension, NetworkFilterConfig, LiveNetworkFilter } from '../types.ts';
import { applyFilterStateValues, compileFilterStateValues } from '../../common/set-filter-state.ts';
import { TcpRecord } from '../tcp_proxy/record.ts';

export const NETWORK_SET_FILTER_STATE_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.set_filter_state.v3.Config';

/** envoy.filters.network.set_filter_state: on_new_connection values, formatted against the connection. */
export const NETWORK_SET_FILTER_STATE_EXTENSION: NetworkFilterExtension = {
  typeUrl: NETWORK_SET_FILTER_STATE_TYPE,
  legacyName: 'envoy.filters.network.set_filter_state',
  compile(name: string, m: Msg | undefined): NetworkFilterConfig {
    m?.onlyFields(['@type', 'on_new_connection']);
    const values = compileFilterStateValues(m?.list('on_new_connection') ?? []);
    const live: LiveNetworkFilter = {
      onConnection(_socket, info) {
        applyFilterStateValues(values, new TcpRecord(info), info);
        return 'continue';
      },
    };
    return { name, live: () => live };
  },
};
