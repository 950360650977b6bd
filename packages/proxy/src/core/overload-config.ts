/**
 * The bootstrap's `overload_manager` (and the older `overload.global_downstream_max_connections`
 * runtime key) compiled once: a global downstream connection cap, an optional fixed-heap monitor,
 * and the actions its pressure triggers.
 */
import { readFileSync } from 'node:fs';
import type { Msg } from '../config/fields.ts';
import { readTypedConfig } from '../config/typed-config.ts';

export const FIXED_HEAP = 'envoy.resource_monitors.fixed_heap';
export const GLOBAL_CONNECTIONS = 'envoy.resource_monitors.global_downstream_max_connections';
const MONITOR_TYPES: Record<string, string> = {
  [FIXED_HEAP]: 'type.googleapis.com/envoy.extensions.resource_monitors.fixed_heap.v3.FixedHeapConfig',
  [GLOBAL_CONNECTIONS]: 'type.googleapis.com/envoy.extensions.resource_monitors.downstream_connections.v3.DownstreamConnectionsConfig',
};

/** The actions we carry out; shrink_heap is accepted and does nothing (V8 sizes its own heap). */
export const ACTIONS = ['envoy.overload_actions.stop_accepting_requests', 'envoy.overload_actions.stop_accepting_connections',
  'envoy.overload_actions.disable_http_keepalive', 'envoy.overload_actions.shrink_heap'] as const;
export type OverloadActionName = (typeof ACTIONS)[number];

export interface OverloadAction {
  readonly name: OverloadActionName;
  /** Active while the heap pressure (0..1) is at or above this. */
  readonly threshold: number;
}

export interface OverloadConfig {
  /** Downstream connections this process accepts at most; past it new ones are closed and counted. */
  readonly maxConnections: number;
  /** Where the cap came from, for logs: the monitor, the runtime key, or the default. */
  readonly maxConnectionsSource: 'monitor' | 'runtime' | 'default';
  readonly maxHeapBytes: number;
  readonly refreshMs: number;
  readonly actions: readonly OverloadAction[];
}

/**
 * With no cap configured (Envoy then has none and warns), we take one from the open-file limit:
 * a proxied connection holds two descriptors (downstream and upstream), and some are kept for
 * listeners, admin, xDS and logs. Running out of descriptors fails accepts and connects alike.
 */
export function defaultMaxConnections(): number {
  try {
    const m = /^Max open files\s+(\d+|unlimited)/m.exec(readFileSync('/proc/self/limits', 'utf8'));
    if (m && m[1] !== 'unlimited') return Math.max(64, Math.floor((Number(m[1]) - 256) / 2));
  } catch { /* not Linux: fall through */ }
  return 50_000;
}

export function compileOverload(om: Msg | undefined, runtime: Msg | undefined): OverloadConfig {
  let maxConnections = -1;
  let source: OverloadConfig['maxConnectionsSource'] = 'default';
  const fromRuntime = runtimeCap(runtime);
  if (fromRuntime >= 0) { maxConnections = fromRuntime; source = 'runtime'; }
  let maxHeapBytes = 0;
  const monitors = new Set<string>();
  if (om) om.onlyFields(['refresh_interval', 'resource_monitors', 'actions', 'buffer_factory_config', 'loadshed_points']);
  for (const r of om?.list('resource_monitors') ?? []) {
    const name = r.requiredStr('name');
    const expected = MONITOR_TYPES[name];
    if (!expected) throw r.error('name', `unsupported resource monitor '${name}' (supported: ${Object.keys(MONITOR_TYPES).join(', ')})`);
    if (monitors.has(name)) throw r.error('name', `duplicate resource monitor '${name}'`);
    monitors.add(name);
    const typed = readTypedConfig(r);
    if (!typed.msg || typed.url !== expected) throw r.error('typed_config', `expected ${expected}`);
    const tc = typed.msg;
    if (name === FIXED_HEAP) {
      maxHeapBytes = positive(tc, 'max_heap_size_bytes');
    } else {
      // The monitor wins over the runtime key, as in Envoy.
      maxConnections = positive(tc, 'max_active_downstream_connections');
      source = 'monitor';
    }
  }
  const actions: OverloadAction[] = [];
  for (const a of om?.list('actions') ?? []) {
    const name = a.requiredStr('name');
    if (!(ACTIONS as readonly string[]).includes(name)) throw a.error('name', `unsupported overload action '${name}' (supported: ${ACTIONS.join(', ')})`);
    const triggers = a.list('triggers');
    if (triggers.length === 0) throw a.error('triggers', 'at least one trigger is required');
    for (const t of triggers) {
      const monitor = t.requiredStr('name');
      if (monitor !== FIXED_HEAP) throw t.error('name', `only ${FIXED_HEAP} can trigger actions (${GLOBAL_CONNECTIONS} is enforced at accept)`);
      if (!monitors.has(monitor)) throw t.error('name', `no resource monitor '${monitor}' is configured`);
      actions.push({ name: name as OverloadActionName, threshold: triggerThreshold(t) });
    }
  }
  return {
    maxConnections: maxConnections >= 0 ? maxConnections : defaultMaxConnections(),
    maxConnectionsSource: maxConnections >= 0 ? source : 'default',
    maxHeapBytes,
    refreshMs: om ? om.durationMs('refresh_interval', 1000) || 1000 : 1000,
    actions,
  };
}

function positive(m: Msg, key: string): number {
  const v = Number(m.raw[key] ?? 0);
  if (!Number.isSafeInteger(v) || v <= 0) throw m.error(key, `expected a positive integer, got ${JSON.stringify(m.raw[key])}`);
  return v;
}

/** threshold.value, or scaled: a yes/no action counts as active once saturated (Envoy's rule). */
function triggerThreshold(t: Msg): number {
  const threshold = t.msg('threshold');
  const scaled = t.msg('scaled');
  if (threshold && scaled) throw t.error('threshold', 'only one of threshold and scaled may be set');
  const value = threshold ? Number(threshold.raw.value ?? 0) : scaled ? Number(scaled.raw.saturation_threshold ?? 0) : NaN;
  const field = threshold ? 'threshold.value' : 'scaled.saturation_threshold';
  if (!threshold && !scaled) throw t.error('threshold', 'a trigger needs threshold or scaled');
  if (!(value > 0 && value <= 1)) throw t.error(field, `expected a value in (0, 1], got ${value}`);
  return value;
}

/** `overload.global_downstream_max_connections` from a static runtime layer, or -1. */
function runtimeCap(runtime: Msg | undefined): number {
  for (const layer of runtime?.list('layers') ?? []) {
    const v = layer.msg('static_layer')?.raw['overload.global_downstream_max_connections'];
    if (v === undefined) continue;
    const n = Number(v);
    if (!Number.isSafeInteger(n) || n < 0) throw layer.error('static_layer', `overload.global_downstream_max_connections: expected a non-negative integer, got ${JSON.stringify(v)}`);
    return n;
  }
  return -1;
}
