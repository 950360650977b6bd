// The network filter interfaces live with the listener that runs them (core); extensions import them here.
export type { NetworkFilterScope, LiveNetworkFilter, NetworkFilterConfig, NetworkFilterExtension } from '../../listener/network-filter.ts';
