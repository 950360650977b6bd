import type { HttpFilterExtension } from './types.ts';
import { FAULT_EXTENSION } from './fault/config.ts';
import { CORS_EXTENSION } from './cors/config.ts';

/** HTTP filters by type URL (the router is handled by the HCM itself). */
const EXTENSIONS: readonly HttpFilterExtension[] = [FAULT_EXTENSION, CORS_EXTENSION];

export const HTTP_FILTERS_BY_URL: ReadonlyMap<string, HttpFilterExtension> = new Map(EXTENSIONS.map((e) => [e.typeUrl, e]));
export const HTTP_FILTERS_BY_NAME: ReadonlyMap<string, HttpFilterExtension> = new Map(EXTENSIONS.map((e) => [e.legacyName, e]));
