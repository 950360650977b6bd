import { setFlagsFromString } from 'node:v8';
import type { Msg } from '../config/fields.ts';
import { ConfigError } from '../core/errors.ts';

// V8's non-backtracking engine runs in time linear in the input, as RE2 does, but it is an
// interpreter (measured 8.5 us vs 0.2 us per SAN regex test). So patterns are checked at load to
// be runnable by it (the `l` flag), then run on the fast backtracking engine, and V8 switches a
// regexp to the linear engine by itself once one match backtracks too much. Process-wide flags:
// they also protect every other regexp (route matching) that the linear engine can run.
setFlagsFromString('--enable-experimental-regexp-engine');
setFlagsFromString('--enable-experimental-regexp-engine-on-excessive-backtracks');

/**
 * An RE2 pattern (envoy.type.matcher.v3.RegexMatcher) compiled for a full match, as Envoy's
 * safe_regex does. Authorization must not be slowed to a crawl by a request (JavaScript's
 * backtracking engine is exponential on patterns like `(a+)+`), so patterns run on V8's linear
 * engine (on excessive backtracking); a pattern it cannot run, or whose RE2 meaning JavaScript would read differently
 * (POSIX classes, \Q…\E, \C, inline flags, \p{…}), is refused with an error naming the field.
 */
export function compileRe2(m: Msg, key = 'regex'): RegExp {
  const src = m.requiredStr(key);
  const checked = checkRe2(src);
  if (typeof checked !== 'string') throw m.error(key, checked.error);
  return new RegExp(`^(?:${checked})$`);
}

/**
 * The same checks for a search-and-replace pattern (regex_rewrite): unanchored, global, so
 * String.prototype.replace substitutes every match as RE2::GlobalReplace does.
 */
export function compileRe2Global(m: Msg, key = 'regex'): RegExp {
  const src = m.requiredStr(key);
  const checked = checkRe2(src);
  if (typeof checked !== 'string') throw m.error(key, checked.error);
  return new RegExp(checked, 'g');
}

/** An RE2 pattern given as plain text (not Envoy JSON): full match; throws ConfigError naming `path`. */
export function compileRe2Text(src: string, path: string): RegExp {
  const checked = checkRe2(src);
  if (typeof checked !== 'string') throw new ConfigError(path, checked.error);
  return new RegExp(`^(?:${checked})$`);
}

/** The JavaScript spelling of an RE2 pattern that V8's linear engine can run, or why it is refused. */
function checkRe2(src: string): string | { error: string } {
  const translated = translateRe2(src);
  if (typeof translated !== 'string') return { error: `${translated.refused} is not supported (RE2 syntax JavaScript would not read the same way)` };
  try {
    new RegExp(translated, 'l');
    new RegExp(translated);
    return translated;
  } catch (err) {
    const msg = (err as Error).message;
    if (msg.includes('linear time')) {
      return { error: `${JSON.stringify(src)} cannot run in linear time here (backreferences, lookaround and counted repetitions above {16} are refused)` };
    }
    return { error: `invalid regular expression: ${msg}` };
  }
}

/** The RE2 → JavaScript spelling changes, or the construct refused. Works on the pattern text once, at load. */
export function translateRe2(src: string): string | { refused: string } {
  let out = '';
  let inClass = false;
  for (let i = 0; i < src.length; i++) {
    const c = src[i];
    if (c === '\\') {
      const n = src[i + 1];
      if (n === undefined) return { refused: 'a trailing backslash' };
      if ('QECpPX'.includes(n)) return { refused: `\\${n}` };
      if (n === 'x' && src[i + 2] === '{') return { refused: '\\x{…}' };
      if (n >= '0' && n <= '9') return { refused: `\\${n} (backreference or octal escape)` };
      if (!inClass && n === 'A') { out += '^'; i++; continue; }
      if (!inClass && n === 'z') { out += '$'; i++; continue; }
      if (n === 'Z') return { refused: '\\Z' };
      out += c + n;
      i++;
      continue;
    }
    if (inClass) {
      if (c === '[' && src[i + 1] === ':') return { refused: 'POSIX character classes ([[:alpha:]])' };
      if (c === ']') inClass = false;
      out += c;
      continue;
    }
    if (c === '[') {
      inClass = true;
      out += c;
      // A leading ']' (or '^]') is a literal in RE2; JavaScript would end the class there.
      if (src[i + 1] === '^') { out += '^'; i++; }
      if (src[i + 1] === ']') { out += '\\]'; i++; }
      continue;
    }
    if (c === '(' && src[i + 1] === '?') {
      if (src.startsWith('(?P<', i)) { out += '(?<'; i += 3; continue; }
      if (src[i + 2] === ':') { out += '(?:'; i += 2; continue; }
      if (src[i + 2] === '<' && src[i + 3] !== '=' && src[i + 3] !== '!') { out += '(?<'; i += 2; continue; }
      return { refused: `the group ${JSON.stringify(src.slice(i, i + 4))} (inline flags or lookaround)` };
    }
    out += c;
  }
  if (inClass) return { refused: 'an unterminated character class' };
  return out;
}
