/**
 * The URI SANs of the last TLS session to each upstream endpoint, for the client side's
 * telemetry: istio-proxy's source reporter labels source_principal / destination_principal with
 * the local and peer certificates of the upstream connection, and pooled HTTP connections do not
 * travel with each request. Noted once per handshake; bounded (oldest entries go first).
 */
import type { TLSSocket } from 'node:tls';
import { formatHostPort } from '../config/address.ts';

export interface UpstreamSans {
  readonly peer: string;
  readonly local: string;
}

const MAX_ENTRIES = 10_000;
const byHost = new Map<string, UpstreamSans>();

function firstUri(san: string | undefined): string {
  if (!san) return '';
  for (const part of san.split(', ')) if (part.startsWith('URI:')) return part.slice(4);
  return '';
}

/** Records a handshake's SANs for `address:port` (called on secureConnect). */
export function noteUpstreamSans(address: string, port: number, socket: TLSSocket): void {
  const peer = firstUri(socket.getPeerX509Certificate()?.subjectAltName);
  const local = firstUri(socket.getX509Certificate()?.subjectAltName);
  if (!peer && !local) return;
  const key = formatHostPort(address, port);
  byHost.delete(key);
  byHost.set(key, { peer, local });
  if (byHost.size > MAX_ENTRIES) byHost.delete(byHost.keys().next().value as string);
}

/** The SANs last seen on a TLS connection to `hostPort` (as Host.hostPort prints it). */
export function upstreamSans(hostPort: string): UpstreamSans | undefined {
  return byHost.get(hostPort);
}
