// Helpers for the EDS tests: an HTTP listener routing path prefixes to clusters, and polling.
import type { Json } from './proxy.ts';
import { T } from './config.ts';
import { TYPE_URL } from './xds-resources.ts';

/** Listener `http` on 127.0.0.1:<port> whose routes send each path prefix to its cluster. */
export function prefixListener(port: number, routes: Readonly<Record<string, string>>): Json {
  return {
    '@type': TYPE_URL.listener, name: 'http', address: { socket_address: { address: '127.0.0.1', port_value: port } },
    filter_chains: [{ filters: [{ name: 'envoy.filters.network.http_connection_manager', typed_config: {
      '@type': T.hcm, stat_prefix: 'http',
      route_config: { name: 'local', virtual_hosts: [{ name: 'all', domains: ['*'], routes: Object.entries(routes).map(([prefix, cluster]) => ({ match: { prefix }, route: { cluster } })) }] },
      http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
    } }] }],
  };
}

/** Polls `check` (errors count as false) every 25 ms until it holds. */
export async function eventually(what: string, check: () => Promise<boolean>, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check().catch(() => false))) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}
