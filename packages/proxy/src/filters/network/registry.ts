import type { NetworkFilterExtension } from './types.ts';

/** Non-terminal network filters by type URL (HCM and tcp_proxy are terminals, compiled by the listener). */
const EXTENSIONS: readonly NetworkFilterExtension[] = [];

export const NETWORK_FILTERS_BY_URL: ReadonlyMap<string, NetworkFilterExtension> = new Map(EXTENSIONS.map((e) => [e.typeUrl, e]));
export const NETWORK_FILTERS_BY_NAME: ReadonlyMap<string, NetworkFilterExtension> = new Map(EXTENSIONS.map((e) => [e.legacyName, e]));
