import type { HttpFilterExtension } from './types.ts';
import { FAULT_EXTENSION } from './fault/config.ts';
import { CORS_EXTENSION } from './cors/config.ts';
import { ISTIO_STATS_HTTP_EXTENSION } from './istio_stats/filter.ts';
import { WASM_EXTENSION } from './metadata_exchange/config.ts';
import { ALPN_EXTENSION } from './alpn/config.ts';
import { GRPC_STATS_EXTENSION } from './grpc_stats/filter.ts';
import { HTTP_RBAC_EXTENSION } from './rbac/config.ts';
import { JWT_AUTHN_EXTENSION } from './jwt_authn/config.ts';
import { HTTP_SET_FILTER_STATE_EXTENSION } from './set_filter_state/config.ts';
import { CONNECT_AUTHORITY_EXTENSION } from './connect_authority/config.ts';
import { CONNECT_BAGGAGE_EXTENSION } from './connect_baggage/config.ts';
import { EXT_AUTHZ_EXTENSION } from './ext_authz/config.ts';
import { PEER_METADATA_EXTENSION } from './peer_metadata/config.ts';
import { COMPRESSOR_EXTENSION } from './compressor/config.ts';

/** HTTP filters by type URL (the router is handled by the HCM itself). */
const EXTENSIONS: readonly HttpFilterExtension[] = [FAULT_EXTENSION, CORS_EXTENSION, ISTIO_STATS_HTTP_EXTENSION, WASM_EXTENSION, ALPN_EXTENSION, GRPC_STATS_EXTENSION,
  HTTP_RBAC_EXTENSION, JWT_AUTHN_EXTENSION, HTTP_SET_FILTER_STATE_EXTENSION, CONNECT_AUTHORITY_EXTENSION, CONNECT_BAGGAGE_EXTENSION, EXT_AUTHZ_EXTENSION,
  PEER_METADATA_EXTENSION, COMPRESSOR_EXTENSION];

export const HTTP_FILTERS_BY_URL: ReadonlyMap<string, HttpFilterExtension> = new Map(EXTENSIONS.map((e) => [e.typeUrl, e]));
export const HTTP_FILTERS_BY_NAME: ReadonlyMap<string, HttpFilterExtension> = new Map(EXTENSIONS.map((e) => [e.legacyName, e]));
