/**
 * @skua/proxy/matchers — the one StringMatcher / RE2 regex / SAN matcher, shared by routes, RBAC,
 * ext_authz, CORS and TLS validation (Envoy semantics: ignore_case never applies to safe_regex;
 * regexes are RE2-checked and run in linear time). Re-exports only.
 */
export { compileStringMatcher, stringMatcher, type StringPredicate, type StringMatchSpec } from '../matchers/string-matcher.ts';
export { compileRe2, compileRe2Global, compileRe2Text, translateRe2 } from '../matchers/regex.ts';
export {
  compileSanMatchers, sansMatch, sanEntries, peerSanEntries, dnsNameMatch, uriSans, spiffeSanMatches,
  type TypedSanMatcher, type SanKind,
} from '../matchers/san.ts';
