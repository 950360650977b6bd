import type { Msg } from '../config/fields.ts';

const FILTER_CONFIG = 'type.googleapis.com/envoy.config.route.v3.FilterConfig';

/** Marker for `FilterConfig{disabled: true}`: the filter is off for this route. */
export const FILTER_DISABLED = Symbol('filter disabled');

export type PerFilterCompilers = ReadonlyMap<string, (m: Msg) => unknown>;

/**
 * typed_per_filter_config compiled at load: keys are http_filters names; values
 * go through that filter's own compiler. Entries for filters this HCM does not
 * have are ignored, as in Envoy.
 */
export function compilePerFilterConfig(m: Msg, compilers: PerFilterCompilers | undefined): ReadonlyMap<string, unknown> | undefined {
  const tpfc = m.msg('typed_per_filter_config');
  if (!tpfc) return undefined;
  const out = new Map<string, unknown>();
  for (const name of Object.keys(tpfc.raw)) {
    const compile = compilers?.get(name);
    if (!compile) continue;
    let any = tpfc.requiredMsg(name);
    if (any.str('@type') === FILTER_CONFIG) {
      if (any.bool('disabled')) { out.set(name, FILTER_DISABLED); continue; }
      const inner = any.msg('config');
      if (!inner) continue;
      any = inner;
    }
    out.set(name, compile(any));
  }
  return out.size ? out : undefined;
}
