import type { Msg } from '../config/fields.ts';
import { ConfigError } from '../core/errors.ts';
import { CidrTable, contains, formatWords, parseCidrRange, type CidrRange } from '../core/cidr.ts';
import { compileStringMatcher } from './string-matcher.ts';
import { unwrapAny } from '../config/typed-config.ts';

/**
 * The unified matcher API (xds.type.matcher.v3.Matcher), generic over the data matched (D) and
 * the action it yields (A); the user supplies its inputs and its action type. Compiled once per
 * config into plain closures; evaluation allocates nothing beyond what an input returns.
 *
 * Semantics, as Envoy documents them:
 * - an OnMatch whose nested matcher does not match (and has no on_no_match) counts as "no match":
 *   a matcher_list goes on to its next field matcher, a tree falls to its own on_no_match;
 * - prefix_match_map tries the longest matching prefix first, then shorter ones;
 * - custom_match xds.type.matcher.v3.IPMatcher: the ranges containing the address, most specific
 *   first; an `exclusive` range that fails its nested match stops the walk;
 * - an input with no value (e.g. no SNI) matches no key and no predicate.
 */

/** One data input: the string Envoy's input yields, or undefined when the data has none. */
export type MatchInput<D> = (d: D) => string | undefined;
/** A compiled matcher: the action, or undefined for no match. */
export type MatchTree<D, A> = (d: D) => A | undefined;

export interface MatcherContext<D, A> {
  /** Compiles an input's TypedExtensionConfig (throw a ConfigError naming the field for unknown types). */
  input(config: Msg): MatchInput<D>;
  /** Compiles an action's TypedExtensionConfig. */
  action(config: Msg): A;
}

const IP_MATCHER = 'type.googleapis.com/xds.type.matcher.v3.IPMatcher';

export function compileXdsMatcher<D, A>(m: Msg, ctx: MatcherContext<D, A>): MatchTree<D, A> {
  m.onlyFields(['matcher_list', 'matcher_tree', 'on_no_match']);
  const onNoMatch = m.has('on_no_match') ? compileOnMatch(m.requiredMsg('on_no_match'), ctx) : undefined;
  let body: MatchTree<D, A>;
  if (m.has('matcher_list') && m.has('matcher_tree')) throw m.error('matcher_tree', 'only one of matcher_list, matcher_tree may be set');
  if (m.has('matcher_list')) body = compileList(m.requiredMsg('matcher_list'), ctx);
  else if (m.has('matcher_tree')) body = compileTree(m.requiredMsg('matcher_tree'), ctx);
  else if (onNoMatch) return onNoMatch; // Envoy allows a matcher that is only its on_no_match
  else throw m.error('', 'one of matcher_list, matcher_tree is required');
  if (!onNoMatch) return body;
  return (d) => body(d) ?? onNoMatch(d);
}

function compileOnMatch<D, A>(m: Msg, ctx: MatcherContext<D, A>): MatchTree<D, A> {
  m.onlyFields(['matcher', 'action', 'keep_matching']);
  if (m.bool('keep_matching')) throw m.error('keep_matching', 'is not supported');
  if (m.has('matcher') === m.has('action')) throw m.error('', 'exactly one of matcher, action is required');
  if (m.has('matcher')) return compileXdsMatcher(m.requiredMsg('matcher'), ctx);
  const action = ctx.action(m.requiredMsg('action'));
  return () => action;
}

function compileList<D, A>(m: Msg, ctx: MatcherContext<D, A>): MatchTree<D, A> {
  const list = m.list('matchers');
  if (list.length === 0) throw m.error('matchers', 'at least one matcher is required');
  const predicates = list.map((fm) => compilePredicate(fm.requiredMsg('predicate'), ctx));
  const actions = list.map((fm) => compileOnMatch(fm.requiredMsg('on_match'), ctx));
  const n = list.length;
  return (d) => {
    for (let i = 0; i < n; i++) {
      if (!predicates[i](d)) continue;
      const r = actions[i](d);
      if (r !== undefined) return r;
    }
    return undefined;
  };
}

type Predicate<D> = (d: D) => boolean;

function compilePredicate<D, A>(m: Msg, ctx: MatcherContext<D, A>): Predicate<D> {
  if (m.has('single_predicate')) {
    const s = m.requiredMsg('single_predicate');
    const input = ctx.input(s.requiredMsg('input'));
    if (s.has('custom_match')) throw s.error('custom_match', `unsupported matcher ${unwrapAny(s.requiredMsg('custom_match').requiredMsg('typed_config')).url}`);
    const test = compileStringMatcher(s.requiredMsg('value_match'));
    return (d) => { const v = input(d); return v !== undefined && test(v); };
  }
  for (const key of ['or_matcher', 'and_matcher'] as const) {
    if (!m.has(key)) continue;
    const list = m.requiredMsg(key).list('predicate').map((p) => compilePredicate(p, ctx));
    if (list.length < 2) throw m.error(`${key}.predicate`, 'at least two predicates are required');
    return key === 'or_matcher' ? (d) => list.some((p) => p(d)) : (d) => list.every((p) => p(d));
  }
  if (m.has('not_matcher')) {
    const inner = compilePredicate(m.requiredMsg('not_matcher'), ctx);
    return (d) => !inner(d);
  }
  throw m.error('', 'one of single_predicate, or_matcher, and_matcher, not_matcher is required');
}

function compileTree<D, A>(m: Msg, ctx: MatcherContext<D, A>): MatchTree<D, A> {
  m.onlyFields(['input', 'exact_match_map', 'prefix_match_map', 'custom_match']);
  const input = ctx.input(m.requiredMsg('input'));
  const kinds = ['exact_match_map', 'prefix_match_map', 'custom_match'].filter((k) => m.has(k));
  if (kinds.length !== 1) throw m.error('', 'exactly one of exact_match_map, prefix_match_map, custom_match is required');
  if (m.has('custom_match')) return compileCustom(m.requiredMsg('custom_match'), input, ctx);
  const exact = m.has('exact_match_map');
  const map = m.requiredMsg(exact ? 'exact_match_map' : 'prefix_match_map').requiredMsg('map');
  const table = new Map<string, MatchTree<D, A>>();
  for (const key of Object.keys(map.raw)) table.set(key, compileOnMatch(map.requiredMsg(key), ctx));
  if (table.size === 0) throw map.error('', 'at least one entry is required');
  if (exact) return (d) => { const v = input(d); return v === undefined ? undefined : table.get(v)?.(d); };
  const keys = [...table.keys()].sort((a, b) => b.length - a.length);
  const steps = keys.map((k) => table.get(k)!);
  return (d) => {
    const v = input(d);
    if (v === undefined) return undefined;
    for (let i = 0; i < keys.length; i++) {
      if (!v.startsWith(keys[i])) continue;
      const r = steps[i](d);
      if (r !== undefined) return r;
    }
    return undefined;
  };
}

function compileCustom<D, A>(m: Msg, input: MatchInput<D>, ctx: MatcherContext<D, A>): MatchTree<D, A> {
  const typed = unwrapAny(m.requiredMsg('typed_config'));
  if (typed.url !== IP_MATCHER) throw m.error('typed_config', `unsupported custom matcher ${typed.url || m.str('name')}`);
  return compileIpMatcher(typed.msg, input, ctx);
}

interface RangeCandidate<D, A> { readonly range: CidrRange; readonly exclusive: boolean; readonly onMatch: MatchTree<D, A> }

/**
 * IPMatcher: every range that contains an address contains all shorter ranges that do (CIDR), so
 * the candidates for an address are its longest range's own entries, then those of the ranges
 * containing that one, longest first. The list per range is built here, once.
 */
function compileIpMatcher<D, A>(m: Msg, input: MatchInput<D>, ctx: MatcherContext<D, A>): MatchTree<D, A> {
  m.onlyFields(['@type', 'range_matchers']);
  const all: RangeCandidate<D, A>[] = [];
  for (const rm of m.list('range_matchers')) {
    rm.onlyFields(['ranges', 'on_match', 'exclusive']);
    const ranges = rm.list('ranges');
    if (ranges.length === 0) throw rm.error('ranges', 'at least one range is required');
    const onMatch = compileOnMatch(rm.requiredMsg('on_match'), ctx);
    for (const r of ranges) all.push({ range: parseCidrRange(r), exclusive: rm.bool('exclusive'), onMatch });
  }
  const byText = new Map<string, RangeCandidate<D, A>[]>();
  for (const c of all) {
    const list = byText.get(c.range.text);
    if (list) list.push(c);
    else byText.set(c.range.text, [c]);
  }
  const entries: Array<readonly [CidrRange, RangeCandidate<D, A>[]]> = [];
  for (const list of byText.values()) {
    const own = list[0].range;
    const wider = all.filter((c) => c.range.prefixLen < own.prefixLen && coversRange(c.range, own));
    wider.sort((a, b) => b.range.prefixLen - a.range.prefixLen);
    entries.push([own, [...list, ...wider]]);
  }
  const table = new CidrTable(entries);
  return (d) => {
    const v = input(d);
    const candidates = v === undefined ? undefined : table.lookup(v);
    if (candidates === undefined) return undefined;
    for (let i = 0; i < candidates.length; i++) {
      const r = candidates[i].onMatch(d);
      if (r !== undefined) return r;
      if (candidates[i].exclusive) return undefined;
    }
    return undefined;
  };
}

/** Whether `outer` contains `inner` (same family, shorter or equal prefix, same leading bits). */
function coversRange(outer: CidrRange, inner: CidrRange): boolean {
  return outer.family === inner.family && contains(outer, formatWords(inner.family, inner.words));
}

/** For users that refuse an input type: the one error text. */
export function unsupportedInput(config: Msg, what: string): ConfigError {
  const typed = config.has('typed_config') ? unwrapAny(config.requiredMsg('typed_config')) : undefined;
  return config.error('typed_config', `${what} cannot match on input ${typed?.url || config.str('name') || '(none)'}`);
}
