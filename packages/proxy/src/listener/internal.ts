import { internalPair, InternalSocket } from './internal-socket.ts';
import type { FilterState } from '../core/filter-state.ts';

/** What the upstream side hands the internal listener besides the bytes (internal_upstream transport). */
export interface InternalConnectMeta {
  /** EnvoyInternalAddress.endpoint_id ('' when unset). */
  readonly endpointId: string;
  /** passthrough_metadata: namespaces of host/cluster metadata, as the connection's dynamic metadata. */
  readonly dynamicMetadata: Readonly<Record<string, unknown>> | undefined;
  /** Filter state objects shared with the upstream connection. */
  readonly filterState: FilterState | undefined;
}

export type InternalAccept = (socket: InternalSocket, meta: InternalConnectMeta) => void;

/**
 * Internal listeners of this thread (one event loop = one Envoy worker) by name. A listener
 * registers instead of binding a port; clusters reach it by envoy_internal_address. The listener
 * manager adds and removes entries as LDS changes.
 */
const registry = new Map<string, InternalAccept>();

/** envoy.bootstrap.internal_listener buffer_size_kb: how much one end buffers before the writer waits (Envoy: 1024 KiB when unset). */
let bufferBytes = 1 << 20;

export function setInternalBufferSize(bytes: number): void {
  bufferBytes = bytes;
}

export function internalBufferSize(): number {
  return bufferBytes;
}

export function registerInternalListener(name: string, accept: InternalAccept): void {
  registry.set(name, accept);
}

/** Removes `name` only if it is still `accept` (a replacement registered meanwhile stays). */
export function unregisterInternalListener(name: string, accept?: InternalAccept): void {
  if (accept === undefined || registry.get(name) === accept) registry.delete(name);
}

export function hasInternalListener(name: string): boolean {
  return registry.has(name);
}

/**
 * Connects to the internal listener `name`: returns the client end at once; it emits 'connect'
 * once the listener took the other end, or 'error' (ECONNREFUSED) when no such listener exists.
 */
export function connectInternal(name: string, meta: InternalConnectMeta): InternalSocket {
  const listenerAddress = `envoy://${name}/${meta.endpointId}`;
  const { client, server } = internalPair(bufferBytes, listenerAddress, 'envoy://internal_client_address/');
  process.nextTick(() => {
    if (client.destroyed) { server.destroy(); return; }
    const accept = registry.get(name);
    if (!accept) {
      client.destroy(Object.assign(new Error(`no internal listener named ${name}`), { code: 'ECONNREFUSED' }));
      return;
    }
    client.markConnected();
    accept(server, meta);
  });
  return client;
}
