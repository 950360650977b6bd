import type { ListenerConfig } from './config.ts';
import type { InternalSocket } from './internal-socket.ts';
import type { InternalConnectMeta } from './internal.ts';
import {
  FilterStateObject, TunnelAuthority, filterStateString, parseIpPort, type FilterState,
  INTERNAL_DST_AUTHORITY_KEY, ORIGINAL_DST_ADDRESS_KEY, ORIGINAL_DST_LOCAL_IP_KEY, ORIGINAL_DST_REMOTE_IP_KEY,
} from '../core/filter-state.ts';

type Address = { address: string; port: number };

/** The addresses and state an internal connection starts with, after its listener filters. */
export interface RestoredAddresses {
  local: Address;
  remote: Address;
  filterState: FilterState | undefined;
  dynamicMetadata: Readonly<Record<string, unknown>> | undefined;
}

const ORIGINAL_DST_NS = 'envoy.filters.listener.original_dst';
const TUNNEL_NS = 'tunnel';

function stringField(ns: unknown, field: string): string | undefined {
  if (ns === null || typeof ns !== 'object') return undefined;
  const v = (ns as Record<string, unknown>)[field];
  return typeof v === 'string' ? v : undefined;
}

/**
 * The listener filters of an internal listener, which see no kernel socket:
 * - original_dst reads dynamic metadata `envoy.filters.listener.original_dst` field `local`, else
 *   the filter state objects `...original_dst.local_ip` / `.remote_ip` (Envoy's internal listener rules);
 * - istio.set_internal_dst_address reads metadata `tunnel` (`destination` → local address, `address` →
 *   the ORIGINAL_DST cluster override), else the `istio.set_internal_dst_address` authority that
 *   connect_authority stored (local address; the override is it with the tunnel port).
 * Values that do not parse as ip:port are ignored, as Envoy does.
 */
export function restoreInternalAddresses(config: ListenerConfig, socket: InternalSocket, meta: InternalConnectMeta): RestoredAddresses {
  // The internal connection owns a copy: its filters must not change the upstream side's objects.
  const out: RestoredAddresses = {
    local: { address: socket.localAddress, port: 0 },
    remote: { address: socket.remoteAddress, port: 0 },
    filterState: meta.filterState ? new Map(meta.filterState) : undefined,
    dynamicMetadata: meta.dynamicMetadata,
  };
  const md = meta.dynamicMetadata;
  if (config.originalDst) {
    const local = parseIpPort(stringField(md?.[ORIGINAL_DST_NS], 'local') ?? filterStateString(out.filterState, ORIGINAL_DST_LOCAL_IP_KEY) ?? '');
    if (local) out.local = local;
    const remote = parseIpPort(filterStateString(out.filterState, ORIGINAL_DST_REMOTE_IP_KEY) ?? '');
    if (remote) out.remote = remote;
  }
  if (config.setInternalDst) {
    const tunnel = md?.[TUNNEL_NS];
    if (tunnel !== undefined) {
      const local = parseIpPort(stringField(tunnel, 'destination') ?? '');
      if (local) out.local = local;
      const target = stringField(tunnel, 'address');
      if (target && parseIpPort(target)) setOverride(out, target);
    } else {
      const auth = out.filterState?.get(INTERNAL_DST_AUTHORITY_KEY);
      const local = auth !== undefined ? parseIpPort(String(auth)) : undefined;
      if (local) {
        out.local = local;
        const port = auth instanceof TunnelAuthority && auth.port ? auth.port : local.port;
        setOverride(out, formatIpPort(local.address, port));
      }
    }
  }
  return out;
}

function setOverride(out: RestoredAddresses, target: string): void {
  const fs = out.filterState ?? (out.filterState = new Map());
  fs.set(ORIGINAL_DST_ADDRESS_KEY, new FilterStateObject(target));
}

function formatIpPort(address: string, port: number): string {
  return address.includes(':') ? `[${address}]:${port}` : `${address}:${port}`;
}
