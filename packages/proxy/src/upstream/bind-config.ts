/**
 * Cluster.upstream_bind_config: the local address upstream connections are made from. Istio's
 * inbound clusters under iptables capture bind 127.0.0.6 so the app's reply skips the capture
 * (ISTIO_OUTPUT returns traffic from 127.0.0.6 on lo) and the app sees a loopback peer.
 */
import { isIP } from 'node:net';
import type { Msg } from '../config/fields.ts';

/** The source address to bind (port 0: any), or undefined when the cluster has no bind config. */
export function readUpstreamBind(m: Msg, tls: boolean): string | undefined {
  const b = m.msg('upstream_bind_config');
  if (!b) return undefined;
  if (tls) throw m.error('upstream_bind_config', 'a source address with a TLS transport socket is not supported yet');
  for (const f of ['freebind', 'socket_options', 'additional_source_addresses', 'extra_source_addresses', 'local_address_selector']) {
    if (b.has(f)) throw b.error(f, 'is not supported yet');
  }
  const sa = b.requiredMsg('source_address');
  const address = sa.requiredStr('address');
  if (isIP(address) === 0) throw sa.error('address', `expected an IP address, got "${address}"`);
  if (sa.num('port_value', 0) !== 0) throw sa.error('port_value', 'binding a fixed source port is not supported (one connection at a time could use it)');
  if (sa.str('protocol', 'TCP') !== 'TCP') throw sa.error('protocol', 'only TCP is supported');
  return address;
}
