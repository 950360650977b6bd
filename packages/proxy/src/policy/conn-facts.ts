import { isIp } from '../core/cidr.ts';
import type { ConnInfo } from '../listener/conn-info.ts';
import type { DynamicMetadata, AuthzFacts, RequestFacts } from './facts.ts';

const NONE: readonly string[] = [];

/** The facts of one downstream connection (network RBAC): no request, no dynamic metadata yet. */
export function connectionFacts(info: ConnInfo): AuthzFacts {
  return {
    directRemoteIp: info.remoteAddress,
    remoteIp: info.remoteAddress,
    destinationIp: info.originalDst.address,
    destinationPort: info.originalDst.port,
    requestedServerName: info.serverName,
    tls: info.tls,
    peerUriSans: info.peerUriSans,
    peerDnsSans: NONE,
    peerSubject: '',
    filterState: info.filterState,
    metadata: undefined,
    request: undefined,
  };
}

/**
 * The facts of one HTTP request. remote_ip is the HCM's downstream remote address: the
 * connection peer with use_remote_address, else the last x-forwarded-for entry (Envoy with
 * xff_num_trusted_hops 0), falling back to the peer.
 */
export function requestFacts(info: ConnInfo, req: RequestFacts, metadata: DynamicMetadata | undefined, useRemoteAddress: boolean): AuthzFacts {
  let remoteIp = info.remoteAddress;
  if (!useRemoteAddress) {
    const xff = req.headers['x-forwarded-for'];
    const last = lastXffEntry(typeof xff === 'string' ? xff : xff?.join(','));
    if (last) remoteIp = last;
  }
  return {
    directRemoteIp: info.remoteAddress,
    remoteIp,
    destinationIp: info.originalDst.address,
    destinationPort: info.originalDst.port,
    requestedServerName: info.serverName,
    tls: info.tls,
    peerUriSans: info.peerUriSans,
    peerDnsSans: NONE,
    peerSubject: '',
    filterState: info.filterState,
    metadata,
    request: req,
  };
}

function lastXffEntry(xff: string | undefined): string | undefined {
  if (!xff) return undefined;
  const comma = xff.lastIndexOf(',');
  const last = (comma < 0 ? xff : xff.slice(comma + 1)).trim();
  return isIp(last) ? last : undefined;
}
