import type { Msg } from '../../../config/fields.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { compileLibrary, type CompressorLibrary } from './library.ts';
import { LiveCompressor } from './filter.ts';

export const COMPRESSOR_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.compressor.v3.Compressor';

/** Envoy's default compressible content types. */
const DEFAULT_CONTENT_TYPES = [
  'text/html', 'text/plain', 'text/css', 'application/javascript', 'application/x-javascript', 'text/javascript', 'text/x-javascript',
  'text/ecmascript', 'text/js', 'text/jscript', 'text/x-js', 'application/ecmascript', 'application/x-json', 'application/xml',
  'application/json', 'image/svg+xml', 'text/xml', 'application/xhtml+xml',
];

/** envoy.extensions.filters.http.compressor.v3.Compressor (response direction), compiled once. */
export interface CompressorConfig {
  readonly library: CompressorLibrary;
  /** compressor_library.name: the stats scope compressor.<name>.<library>. */
  readonly libraryName: string;
  readonly enabled: boolean;
  readonly minContentLength: number;
  readonly contentTypes: ReadonlySet<string>;
  readonly disableOnEtag: boolean;
  readonly removeAcceptEncoding: boolean;
  /** On equal q-values this compressor wins over earlier ones. */
  readonly chooseFirst: boolean;
}

/** RuntimeFeatureFlag: its default_value (runtime overrides are not read). */
function flag(m: Msg | undefined, fallback: boolean): boolean {
  if (!m) return fallback;
  m.onlyFields(['default_value', 'runtime_key']);
  return m.bool('default_value', fallback);
}

export function compileCompressor(m: Msg | undefined): CompressorConfig {
  if (!m) throw new Error('unreachable: the compressor needs its typed_config');
  m.onlyFields(['@type', 'content_length', 'content_type', 'disable_on_etag_header', 'remove_accept_encoding_header', 'runtime_enabled',
    'compressor_library', 'request_direction_config', 'response_direction_config', 'choose_first']);
  const req = m.msg('request_direction_config');
  // Present means request compression on (its common_config.enabled defaults to true): not built.
  if (req && flag(req.msg('common_config')?.msg('enabled'), true)) throw m.error('request_direction_config', 'request body compression is not supported yet');
  const resp = m.msg('response_direction_config');
  // The deprecated top-level fields apply when response_direction_config is absent (Envoy's fallback).
  const common = resp?.msg('common_config');
  const source = resp ? common : m;
  const types = resp ? common?.strList('content_type') ?? [] : m.strList('content_type');
  return {
    library: compileLibrary(m.requiredMsg('compressor_library')),
    libraryName: m.requiredMsg('compressor_library').str('name'),
    enabled: flag(resp ? common?.msg('enabled') : m.msg('runtime_enabled'), true),
    minContentLength: source?.num(resp ? 'min_content_length' : 'content_length', 30) ?? 30,
    contentTypes: new Set((types.length ? types : DEFAULT_CONTENT_TYPES).map((t) => t.trim().toLowerCase())),
    disableOnEtag: (resp ?? m).bool('disable_on_etag_header'),
    removeAcceptEncoding: (resp ?? m).bool('remove_accept_encoding_header'),
    chooseFirst: m.bool('choose_first'),
  };
}

/**
 * envoy.filters.http.compressor: compresses response bodies (gzip, brotli, zstd) for clients whose
 * Accept-Encoding takes the encoding; several compressors in one chain negotiate one encoding.
 */
export const COMPRESSOR_EXTENSION: HttpFilterExtension = {
  typeUrl: COMPRESSOR_TYPE,
  legacyName: 'envoy.filters.http.compressor',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    const config = compileCompressor(m);
    return { name, live: (scope) => new LiveCompressor(config, scope) };
  },
};
