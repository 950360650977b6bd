import type { Msg } from '../../../config/fields.ts';
import type { NetworkFilterConfig, NetworkFilterExtension } from '../types.ts';

/** Istio's io.istio.network.authn.Config (sidecar network filter `istio_authn`, usually in a TypedStruct). */
export const ISTIO_AUTHN_TYPE = 'type.googleapis.com/io.istio.network.authn.Config';
export const PEER_PRINCIPAL = 'io.istio.peer_principal';

/**
 * Puts the peer's principal — the first URI SAN with the spiffe:// prefix — into the connection's
 * filter state as `io.istio.peer_principal`, where istiod's RBAC filter_state principals read it.
 * Nothing is set without a verified peer certificate. (`io.istio.local_principal` needs the
 * local certificate's SAN, which the connection record does not carry yet.)
 */
export const ISTIO_AUTHN_EXTENSION: NetworkFilterExtension = {
  typeUrl: ISTIO_AUTHN_TYPE,
  legacyName: 'istio_authn',
  compile(name: string, m: Msg | undefined): NetworkFilterConfig {
    m?.onlyFields(['@type', 'shared']);
    return {
      name,
      live: () => ({
        onConnection(_socket, info) {
          const principal = info.peerUriSans.find((s) => s.startsWith('spiffe://'));
          if (principal !== undefined) (info.filterState ??= new Map()).set(PEER_PRINCIPAL, principal);
          return 'continue';
        },
      }),
    };
  },
};
