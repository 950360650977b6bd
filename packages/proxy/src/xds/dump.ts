/** The dynamic sections of /config_dump, shaped like Envoy's admin.v3 *ConfigDump messages. */
import type { DynamicConfig, ErrorState, TrackedResource } from './dynamic-config.ts';
import { allRdsRoutes } from '../http/rds.ts';
import { TYPE_URL } from './type-urls.ts';

type Json = Record<string, unknown>;

const iso = (ms: number): string => new Date(ms).toISOString();

function errorState(e: ErrorState | undefined): Json | undefined {
  return e ? { failed_configuration: e.json, last_update_attempt: iso(e.time), details: e.details } : undefined;
}

function state(t: TrackedResource, key: string): Json {
  return { version_info: t.version, [key]: t.json, last_updated: iso(t.lastUpdated) };
}

export function dynamicListeners(d: DynamicConfig): Json[] {
  const errors = d.errors.get(TYPE_URL.listener);
  const names = new Set([...d.activeListeners.keys(), ...d.warmingListeners.keys(), ...(errors?.keys() ?? [])]);
  return [...names].sort().map((name) => {
    const active = d.activeListeners.get(name);
    const warming = d.warmingListeners.get(name);
    const out: Json = { name };
    if (active) out.active_state = state(active, 'listener');
    if (warming) out.warming_state = state(warming.tracked, 'listener');
    const err = errorState(errors?.get(name));
    if (err) out.error_state = err;
    return out;
  });
}

export function dynamicClusters(d: DynamicConfig): { active: Json[]; warming: Json[] } {
  const errors = d.errors.get(TYPE_URL.cluster);
  const active = [...d.activeClusters].map(([name, t]) => {
    const out = state(t, 'cluster');
    const err = errorState(errors?.get(name));
    if (err) out.error_state = err;
    return out;
  });
  // A cluster refused before it was ever accepted still shows, with its error.
  for (const [name, e] of errors ?? []) {
    if (!d.activeClusters.has(name) && !d.warmingClusters.has(name)) active.push({ cluster: { name }, error_state: errorState(e) });
  }
  const warming = [...d.warmingClusters.values()].map((w) => state(w.tracked, 'cluster'));
  return { active, warming };
}

export function dynamicRoutes(d: DynamicConfig): Json[] {
  const out: Json[] = [];
  for (const r of allRdsRoutes()) {
    if (!r.source) continue;
    out.push({ version_info: r.version, route_config: r.source, last_updated: iso(r.lastUpdated) });
  }
  for (const [name, e] of d.errors.get(TYPE_URL.route) ?? []) out.push({ route_config: { name }, error_state: errorState(e) });
  return out;
}

export function dynamicEndpoints(d: DynamicConfig): Json[] {
  return [...d.eds.assignments.values()].map((e) => state(e.tracked, 'endpoint_config'));
}

export function dynamicSecrets(d: DynamicConfig): Json[] {
  return [...d.secrets].map(([name, t]) => ({ name, ...state(t, 'secret') }));
}

export function ecdsFilters(d: DynamicConfig): Json[] {
  return [...d.extensions.values()].map((t) => state(t, 'ecds_filter'));
}
