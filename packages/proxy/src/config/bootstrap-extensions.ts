import type { Msg } from './fields.ts';
import { readTypedConfig, describeTypedConfig } from './typed-config.ts';

const INTERNAL_LISTENER = 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener';
const WORKLOAD_DISCOVERY = 'type.googleapis.com/istio.workload.BootstrapExtension';

/** bootstrap_extensions Skua acts on. */
export interface BootstrapExtensions {
  /** envoy.bootstrap.internal_listener: per-connection buffer of internal connections, in bytes. */
  readonly internalListener: { readonly bufferBytes: number } | undefined;
  /**
   * istio.workload.BootstrapExtension: subscribe to istio.workload.Workload over ADS (Istio's
   * METADATA_DISCOVERY); peer_metadata and metadata exchange look peers up in it. The path names it in errors.
   */
  readonly workloadDiscovery: { readonly path: string } | undefined;
}

/** Reads bootstrap_extensions (typed_config directly or inside a TypedStruct); others are refused. */
export function compileBootstrapExtensions(list: Msg[]): BootstrapExtensions {
  let internalListener: BootstrapExtensions['internalListener'];
  let workloadDiscovery: BootstrapExtensions['workloadDiscovery'];
  for (const ext of list) {
    const typed = readTypedConfig(ext);
    if (typed.url === INTERNAL_LISTENER) {
      const m = typed.msg!;
      m.onlyFields(typed.wrapper ? ['buffer_size_kb'] : ['@type', 'buffer_size_kb']);
      // Envoy: 1024 KiB when unset, 1..8192 KiB.
      const kb = m.num('buffer_size_kb', 1024);
      if (!Number.isInteger(kb) || kb < 1 || kb > 8192) throw m.error('buffer_size_kb', `must be between 1 and 8192, got ${kb}`);
      if (internalListener) throw ext.error('typed_config', 'the internal listener extension is given twice');
      internalListener = { bufferBytes: kb * 1024 };
      continue;
    }
    if (typed.url === WORKLOAD_DISCOVERY) {
      const m = typed.msg!;
      m.onlyFields(typed.wrapper ? ['config_source'] : ['@type', 'config_source']);
      const source = m.requiredMsg('config_source');
      if (!source.has('ads')) throw source.error('', 'only `ads: {}` config sources are supported for workload discovery');
      source.onlyFields(['ads', 'resource_api_version', 'initial_fetch_timeout']);
      if (workloadDiscovery) throw ext.error('typed_config', 'the workload discovery extension is given twice');
      workloadDiscovery = { path: ext.field('typed_config') };
      continue;
    }
    throw ext.error('typed_config', `unsupported bootstrap extension ${describeTypedConfig(typed, ext.str('name'))}`);
  }
  return { internalListener, workloadDiscovery };
}
