import type { NetworkTerminalExtension } from '../../../listener/terminal.ts';
import { compileTcpProxy, TCP_PROXY_TYPE } from './config.ts';
import { TcpProxy } from './filter.ts';

/** envoy.filters.network.tcp_proxy as a registered network terminal. */
export const TCP_PROXY_TERMINAL: NetworkTerminalExtension = {
  typeUrl: TCP_PROXY_TYPE,
  legacyName: 'envoy.filters.network.tcp_proxy',
  compile(m) {
    const config = compileTcpProxy(m);
    return { kind: 'tcp_proxy', live: (s) => new TcpProxy(config, s.clusters, s.store) };
  },
};
