import type { Msg } from '../config/fields.ts';
import { compileRe2 } from './regex.ts';

export type StringPredicate = (s: string) => boolean;

/**
 * envoy.type.matcher.v3.StringMatcher. `ignore_case` applies to exact/prefix/suffix/contains,
 * never to safe_regex (as in Envoy).
 */
export function compilePolicyStringMatcher(m: Msg): StringPredicate {
  const ignoreCase = m.bool('ignore_case');
  if (m.has('custom')) throw m.error('custom', 'string matcher extensions are not supported');
  if (m.has('exact')) {
    const v = m.str('exact');
    if (!ignoreCase) return (s) => s === v;
    const lv = v.toLowerCase();
    return (s) => s.length === lv.length && s.toLowerCase() === lv;
  }
  if (m.has('prefix')) {
    const v = ignoreCase ? m.str('prefix').toLowerCase() : m.str('prefix');
    return ignoreCase ? (s) => s.toLowerCase().startsWith(v) : (s) => s.startsWith(v);
  }
  if (m.has('suffix')) {
    const v = ignoreCase ? m.str('suffix').toLowerCase() : m.str('suffix');
    return ignoreCase ? (s) => s.toLowerCase().endsWith(v) : (s) => s.endsWith(v);
  }
  if (m.has('contains')) {
    const v = ignoreCase ? m.str('contains').toLowerCase() : m.str('contains');
    return ignoreCase ? (s) => s.toLowerCase().includes(v) : (s) => s.includes(v);
  }
  if (m.has('safe_regex')) {
    const re = compileRe2(m.requiredMsg('safe_regex'));
    return (s) => re.test(s);
  }
  throw m.error('', 'one of exact, prefix, suffix, contains, safe_regex is required');
}
