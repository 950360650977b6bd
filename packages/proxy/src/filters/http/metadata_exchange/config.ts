import type { Msg } from '../../../config/fields.ts';
import { ConfigError } from '../../../core/errors.ts';
import type { HttpFilterConfig, HttpFilterExtension, HttpFilterScope, LiveHttpFilter } from '../types.ts';
import { LiveMetadataExchange } from './filter.ts';

/** Envoy's Wasm filter; only Istio's built-in (null VM) metadata exchange plugin is implemented. */
export const WASM_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.wasm.v3.Wasm';
const NULL_RUNTIME = 'envoy.wasm.runtime.null';
const MX_PLUGIN = 'envoy.wasm.metadata_exchange';
const MX_CONFIG = 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange';
const STRING_VALUE = 'type.googleapis.com/google.protobuf.StringValue';

export interface HttpMetadataExchangeConfig {
  /** max_peer_cache_size from the plugin configuration (decoded peers are cached either way). */
  readonly maxPeerCacheSize: number;
}

export function compileWasmMetadataExchange(m: Msg | undefined): HttpMetadataExchangeConfig {
  if (!m) throw new Error('unreachable');
  m.onlyFields(['@type', 'config']);
  const c = m.requiredMsg('config');
  c.onlyFields(['name', 'root_id', 'vm_config', 'configuration', 'fail_open', 'failure_policy', 'capability_restriction_config', 'allow_on_headers_stop_iteration']);
  if (c.has('capability_restriction_config')) throw c.error('capability_restriction_config', 'is not supported');
  const vm = c.requiredMsg('vm_config');
  const runtime = vm.str('runtime');
  if (runtime !== NULL_RUNTIME) {
    throw vm.error('runtime', `Wasm runtime ${JSON.stringify(runtime)} is not supported: only ${NULL_RUNTIME} with ${MX_PLUGIN} (Istio's built-in metadata exchange)`);
  }
  const code = vm.requiredMsg('code');
  if (code.has('remote')) throw code.error('remote', `remote Wasm code is not supported: only the built-in ${MX_PLUGIN}`);
  const local = code.requiredMsg('local');
  const plugin = local.str('inline_string') || local.str('filename');
  if (plugin !== MX_PLUGIN) {
    throw local.error(local.has('inline_string') ? 'inline_string' : 'filename', `null-VM plugin ${JSON.stringify(plugin)} is not supported: only ${MX_PLUGIN}`);
  }
  let maxPeerCacheSize = 500;
  const conf = c.msg('configuration');
  if (conf) {
    const url = conf.str('@type');
    if (url === STRING_VALUE) {
      const text = conf.str('value');
      let json: unknown;
      try { json = text ? JSON.parse(text) : {}; } catch { throw conf.error('value', 'is not JSON'); }
      const size = (json as Record<string, unknown>).max_peer_cache_size;
      if (size !== undefined) {
        if (typeof size !== 'number' || !Number.isInteger(size) || size < 0) throw conf.error('value', 'max_peer_cache_size must be a non-negative integer');
        maxPeerCacheSize = size;
      }
    } else if (url === MX_CONFIG) {
      conf.onlyFields(['@type', 'protocol', 'enable_discovery', 'additional_labels']);
      if (conf.bool('enable_discovery')) throw conf.error('enable_discovery', 'workload discovery is not supported');
      if (conf.strList('additional_labels').length) throw conf.error('additional_labels', 'is not supported');
    } else {
      throw conf.error('@type', `unsupported metadata exchange configuration ${url}`);
    }
  }
  return { maxPeerCacheSize };
}

class MetadataExchangeFilterConfig implements HttpFilterConfig {
  readonly name: string;
  private readonly config: HttpMetadataExchangeConfig;
  constructor(name: string, config: HttpMetadataExchangeConfig) { this.name = name; this.config = config; }
  live(scope: HttpFilterScope): LiveHttpFilter { return new LiveMetadataExchange(scope.direction ?? 'UNSPECIFIED'); }
}

export const WASM_EXTENSION: HttpFilterExtension = {
  typeUrl: WASM_TYPE,
  legacyName: 'envoy.filters.http.wasm',
  compile: (name, m) => {
    if (!m) throw new ConfigError('typed_config', `is required for the Wasm filter ${name}`);
    return new MetadataExchangeFilterConfig(name, compileWasmMetadataExchange(m));
  },
};
