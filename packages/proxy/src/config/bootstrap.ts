import { explainError } from '../core/explain-error.ts';
import { readFileSync } from 'node:fs';
import type { LocalNode } from '../core/node.ts';
import { parse as parseYaml } from 'yaml';
import { Msg } from './fields.ts';
import { normalizeKeys } from './normalize.ts';
import { readAddress, type SocketAddress } from './address.ts';
import { ConfigError } from '../core/errors.ts';
import { compileListener, type ListenerConfig } from '../listener/config.ts';
import { compileCluster, type ClusterConfig } from '../upstream/cluster-config.ts';
import { readDynamicResources, type DynamicResources } from '../xds/bootstrap-ads.ts';
import { compileBootstrapExtensions, type BootstrapExtensions } from './bootstrap-extensions.ts';
import { compileOverload, type OverloadConfig } from '../core/overload-config.ts';
import { checkMessage, rejectUnknown, unknownFieldMessage, type MessageSchema, type UnknownField } from './strict.ts';
import { envoySchemas } from './proto-schema.ts';
import { log } from '../core/log.ts';
import { compileStatsOptions, type StatsOptions } from '../stats/matcher.ts';


/** Top-level Bootstrap fields: handled, accepted as no-ops for a static proxy, or refused. */
const ACCEPTED = new Set(['node', 'static_resources', 'admin', 'layered_runtime', 'stats_config', 'stats_flush_interval',
  'cluster_manager', 'watchdog', 'watchdogs', 'overload_manager', 'enable_dispatcher_stats', 'use_tcp_for_dns_lookups',
  'typed_dns_resolver_config', 'dns_resolution_config', 'node_context_params', 'default_regex_engine',
  // Formatting of the proxy's own log and stat memory options: nothing a data path depends on.
  'application_log_config', 'deferred_stat_options', 'bootstrap_extensions', 'dynamic_resources']);

export interface BootstrapConfig {
  readonly node: LocalNode;
  readonly admin: { address: SocketAddress } | undefined;
  readonly listeners: readonly ListenerConfig[];
  readonly clusters: readonly ClusterConfig[];
  /** ADS settings when the bootstrap has dynamic_resources. */
  readonly dynamic: DynamicResources | undefined;
  readonly extensions: BootstrapExtensions;
  /** overload_manager: the downstream connection cap and heap-triggered actions. */
  readonly overload: OverloadConfig;
  /** stats_config.stats_matcher and deferred_stat_options: which stats exist, and when. */
  readonly stats: StatsOptions;
  /** The bootstrap as given (normalised), for /config_dump. */
  readonly source: Record<string, unknown>;
  /** Unknown fields let through by --allow-unknown-static-fields (server.static_unknown_fields). */
  readonly unknownFields: readonly string[];
}

export interface CompileOptions {
  /**
   * Field names the Bootstrap proto does not have, at any depth: 'reject' (Envoy's default),
   * 'warn' (--allow-unknown-static-fields: log and count), 'skip' (checked already: workers).
   */
  readonly unknownFields?: 'reject' | 'warn' | 'skip';
}

/** Reads `-c` and `--config-yaml` (merged over it, as Envoy does) into one plain object. */
export function loadBootstrapSource(configPath: string | undefined, configYaml: string | undefined): Record<string, unknown> {
  let base: unknown = {};
  if (configPath) {
    let text: string;
    try { text = readFileSync(configPath, 'utf8'); } catch (err) { throw new ConfigError('', explainError(err)); }
    base = normalizeKeys(parseText(text, configPath));
  }
  // Normalise each source before merging, so camelCase and snake_case spellings merge field by field.
  if (configYaml) base = merge(base, normalizeKeys(parseText(configYaml, '--config-yaml')));
  if (!configPath && !configYaml) throw new ConfigError('', 'no configuration: pass -c/--config-path or --config-yaml');
  const normalized = base;
  if (normalized === null || typeof normalized !== 'object' || Array.isArray(normalized)) throw new ConfigError('', 'the bootstrap must be an object');
  return normalized as Record<string, unknown>;
}

function parseText(text: string, where: string): unknown {
  try {
    return where.endsWith('.json') ? JSON.parse(text) : parseYaml(text);
  } catch (err) {
    throw new ConfigError('', `${where}: cannot parse: ${(err as Error).message}`);
  }
}

/** Proto MergeFrom semantics: messages merge, repeated fields append, scalars replace. */
function merge(a: unknown, b: unknown): unknown {
  if (Array.isArray(a) && Array.isArray(b)) return [...a, ...b];
  if (a && b && typeof a === 'object' && typeof b === 'object' && !Array.isArray(a) && !Array.isArray(b)) {
    const out: Record<string, unknown> = { ...(a as Record<string, unknown>) };
    for (const [k, v] of Object.entries(b as Record<string, unknown>)) out[k] = k in out ? merge(out[k], v) : v;
    return out;
  }
  return b;
}

export function compileBootstrap(given: Record<string, unknown>, options: CompileOptions = {}): BootstrapConfig {
  const { raw, unknownFields } = checkBootstrapFields(given, options.unknownFields ?? 'reject');
  const m = new Msg(raw, '');
  for (const key of Object.keys(raw)) {
    if (!ACCEPTED.has(key)) throw m.error(key, 'is not supported');
  }
  const extensions = compileBootstrapExtensions(m.list('bootstrap_extensions'));
  const sr = m.msg('static_resources');
  if (sr) for (const f of ['secrets']) if (sr.has(f)) throw sr.error(f, 'static secrets are not supported yet');
  const clusters = (sr?.list('clusters') ?? []).map((c) => compileCluster(c));
  const clusterNames = new Set<string>();
  for (const [i, c] of clusters.entries()) {
    if (clusterNames.has(c.name)) throw new ConfigError(`static_resources.clusters[${i}].name`, `duplicate cluster ${c.name}`);
    clusterNames.add(c.name);
  }
  const listeners = (sr?.list('listeners') ?? []).map((l, i) => compileListener(l, i));
  const names = new Set<string>();
  for (const [i, l] of listeners.entries()) {
    if (names.has(l.name)) throw new ConfigError(`static_resources.listeners[${i}].name`, `duplicate listener ${l.name}`);
    names.add(l.name);
  }
  checkClusterReferences(sr, clusterNames);
  const dr = m.msg('dynamic_resources');
  const dynamic = dr ? readDynamicResources(dr) : undefined;
  if (dynamic && !clusterNames.has(dynamic.clusterName)) throw dr!.error('ads_config.grpc_services[0].envoy_grpc.cluster_name', `unknown cluster '${dynamic.clusterName}'`);
  if (extensions.workloadDiscovery && !dynamic) {
    throw new ConfigError(extensions.workloadDiscovery.path, 'workload discovery over ADS needs dynamic_resources.ads_config');
  }
  const internal = listeners.findIndex((l) => l.internal);
  if (internal >= 0 && !extensions.internalListener) {
    throw new ConfigError(`static_resources.listeners[${internal}].internal_listener`, 'internal listeners need the envoy.bootstrap.internal_listener bootstrap extension');
  }
  const overload = compileOverload(m.msg('overload_manager'), m.msg('layered_runtime'));
  const stats = compileStatsOptions(m.msg('stats_config'), m.msg('deferred_stat_options'));
  const node = m.msg('node');
  const admin = m.msg('admin');
  return {
    node: {
      id: node?.str('id') ?? '', cluster: node?.str('cluster') ?? '', metadata: (node?.raw.metadata as Record<string, unknown>) ?? {},
      locality: (node?.raw.locality as LocalNode['locality']) ?? {},
    },
    admin: admin?.has('address') ? { address: readAddress(admin.requiredMsg('address')) } : undefined,
    listeners,
    clusters,
    dynamic,
    extensions,
    overload,
    stats,
    source: raw,
    unknownFields,
  };
}

/**
 * Envoy's strict static validation against the Bootstrap descriptor. 'warn' logs each unknown
 * field and drops it from a copy, as Envoy's lenient parse does, so no reader refuses it later.
 */
function checkBootstrapFields(given: Record<string, unknown>, mode: 'reject' | 'warn' | 'skip'): { raw: Record<string, unknown>; unknownFields: string[] } {
  const found: UnknownField[] = [];
  if (mode === 'skip') return { raw: given, unknownFields: [] };
  const raw = mode === 'warn' ? structuredClone(given) : given;
  // Names only, from the packages the bootstrap uses (config/proto-schema.ts), for a dynamic bootstrap
  // too: its ADS client loads protobufjs reflection only for the packages its resources use, and the
  // Bootstrap's imports (~60 files) cost a sidecar ~0.5 MB of live heap for good (issue 13).
  const schemas = envoySchemas();
  const typeForUrl = (url: string): MessageSchema | null => schemas.message(url.slice(url.lastIndexOf('/') + 1));
  const bootstrap = typeForUrl('type.googleapis.com/envoy.config.bootstrap.v3.Bootstrap');
  if (!bootstrap) throw new ConfigError('', 'the envoy.config.bootstrap.v3.Bootstrap descriptor is missing');
  checkMessage(bootstrap, raw, '', { typeForUrl, onUnknown: mode === 'reject' ? rejectUnknown : (f) => { found.push(f); } });
  const unknownFields = found.map((f) => `${f.path}: ${unknownFieldMessage(f.typeName)}`);
  for (const text of unknownFields) log.warn(`static config: ${text} (ignored: --allow-unknown-static-fields)`);
  for (const f of found) delete f.owner[f.key];
  return { raw, unknownFields };
}

/** Envoy validates that static routes and tcp_proxy name existing clusters (validate_clusters). */
function checkClusterReferences(sr: Msg | undefined, clusters: Set<string>): void {
  if (!sr) return;
  const check = (m: Msg, key: string): void => {
    const name = m.str(key);
    if (name && !clusters.has(name)) throw m.error(key, `unknown cluster '${name}'`);
  };
  for (const l of sr.list('listeners')) {
    for (const chain of [...l.list('filter_chains'), ...(l.msg('default_filter_chain') ? [l.requiredMsg('default_filter_chain')] : [])]) {
      for (const f of chain.list('filters')) {
        const tc = f.msg('typed_config');
        if (!tc) continue;
        check(tc, 'cluster');
        for (const w of tc.msg('weighted_clusters')?.list('clusters') ?? []) check(w, 'name');
        const rc = tc.msg('route_config');
        if (!rc || rc.has('validate_clusters') && !rc.bool('validate_clusters')) continue;
        for (const vh of rc.list('virtual_hosts')) for (const r of vh.list('routes')) {
          const ra = r.msg('route');
          if (!ra) continue;
          check(ra, 'cluster');
          for (const w of ra.msg('weighted_clusters')?.list('clusters') ?? []) check(w, 'name');
        }
      }
    }
  }
}
