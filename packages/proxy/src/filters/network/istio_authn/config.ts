import type { Msg } from '../../../config/fields.ts';
import type { NetworkFilterExtension, NetworkFilterConfig, LiveNetworkFilter } from '../types.ts';
import { FilterStateObject, setFilterState, LOCAL_PRINCIPAL_KEY, PEER_PRINCIPAL_KEY, type StreamSharing } from '../../../core/filter-state.ts';
import type { ConnInfo } from '../../../listener/conn-info.ts';

export const ISTIO_AUTHN_TYPE = 'type.googleapis.com/io.istio.network.authn.Config';

/** The principal is the first URI SAN with the spiffe:// prefix. */
function spiffe(sans: readonly string[] | undefined): string | undefined {
  if (!sans) return undefined;
  for (const s of sans) if (s.startsWith('spiffe://')) return s;
  return undefined;
}

/**
 * io.istio.network.authn: after the TLS handshake, records the peer's and our own SPIFFE principal
 * as filter state `io.istio.peer_principal` / `io.istio.local_principal` (read-only), only when
 * the peer presented a certificate. `shared` (older istio-proxy; newer ones always share) makes
 * them travel once to the upstream connection, which is how RBAC on an internal listener
 * behind a tunnel sees the tunnel's peer.
 */
export const ISTIO_AUTHN_EXTENSION: NetworkFilterExtension = {
  typeUrl: ISTIO_AUTHN_TYPE,
  legacyName: 'io.istio.network.authn',
  compile(name: string, m: Msg | undefined): NetworkFilterConfig {
    m?.onlyFields(['@type', 'shared']);
    const sharing: StreamSharing = m?.bool('shared', true) === false ? 'NONE' : 'ONCE';
    const live: LiveNetworkFilter = {
      onConnection(_socket, info: ConnInfo) {
        const peer = spiffe(info.peerUriSans);
        if (peer === undefined) return 'continue';
        setFilterState(info, PEER_PRINCIPAL_KEY, new FilterStateObject(peer, sharing));
        const local = spiffe(info.localUriSans);
        if (local !== undefined) setFilterState(info, LOCAL_PRINCIPAL_KEY, new FilterStateObject(local, sharing));
        return 'continue';
      },
    };
    return { name, live: () => live };
  },
};
