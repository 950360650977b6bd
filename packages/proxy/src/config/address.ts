import { isIP } from 'node:net';
import type { Msg } from './fields.ts';

export interface SocketAddress {
  readonly address: string;
  readonly port: number;
  /** True when `address` is a name to resolve (STRICT_DNS / LOGICAL_DNS endpoints). */
  readonly isName: boolean;
}

/** envoy.config.core.v3.Address with a socket_address; pipes and internal addresses are not served. */
export function readAddress(m: Msg, allowNames = false): SocketAddress {
  if (m.has('pipe')) throw m.error('pipe', 'unix domain socket addresses are not supported');
  if (m.has('envoy_internal_address')) throw m.error('envoy_internal_address', 'an internal address is not allowed here (only in cluster endpoints and on internal listeners)');
  const sa = m.requiredMsg('socket_address');
  if (sa.has('named_port')) throw sa.error('named_port', 'named ports are not supported');
  if (sa.str('protocol', 'TCP') !== 'TCP') throw sa.error('protocol', 'only TCP is supported');
  const address = sa.requiredStr('address');
  const port = sa.num('port_value');
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw sa.error('port_value', `invalid port ${port}`);
  const isName = isIP(address) === 0;
  if (isName && !allowNames) throw sa.error('address', `${JSON.stringify(address)} is not an IP address`);
  return { address, port, isName };
}

export function formatHostPort(address: string, port: number): string {
  // Internal addresses (envoy://listener/endpoint_id) print as they are, as Envoy prints them.
  if (address.startsWith('envoy://')) return address;
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
