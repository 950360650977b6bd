import type { NetworkTerminalExtension } from '../../../listener/terminal.ts';
import { compileHcm, HCM_TYPE } from './config.ts';
import { HttpConnectionManager } from './filter.ts';

/** envoy.filters.network.http_connection_manager as a registered network terminal. */
export const HCM_TERMINAL: NetworkTerminalExtension = {
  typeUrl: HCM_TYPE,
  legacyName: 'envoy.filters.network.http_connection_manager',
  compile(m) {
    const config = compileHcm(m);
    return { kind: 'http_connection_manager', live: (s) => new HttpConnectionManager(config, s.clusters, s.store, s.direction, s.drainManager) };
  },
};
