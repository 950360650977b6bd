/** PeerAuthentication, AuthorizationPolicy, RequestAuthentication (security.istio.io): CRD and istiod rules. */
import type { Node } from '../reader.ts';
import type { AuthorizationPolicy, AuthzCondition, AuthzOperation, AuthzRule, AuthzSource, JwtRule, Meta, MtlsMode, PeerAuthentication, RequestAuthentication } from '../types.ts';
import { cidrProblem, matchLabels, oneSelector, targetRefs } from './common.ts';

const MODES = ['UNSET', 'DISABLE', 'PERMISSIVE', 'STRICT'] as const;

function mode(n: Node | undefined): MtlsMode {
  if (!n) return 'UNSET';
  n.known(['mode']);
  return n.oneOf('mode', MODES) ?? 'UNSET';
}

export function readPeerAuthentication(meta: Meta, spec: Node): PeerAuthentication {
  spec.known(['selector', 'mtls', 'portLevelMtls']);
  const selector = matchLabels(spec);
  const portLevel = new Map<number, MtlsMode>();
  const plm = spec.obj('portLevelMtls');
  if (plm) {
    if (!selector || Object.keys(selector).length === 0) spec.rule('portLevelMtls requires selector');
    const keys = Object.keys(plm.raw);
    if (keys.length === 0) plm.invalid('', 0, `${plm.path} in body should have at least 1 properties`);
    for (const k of keys) {
      if (!/^\d+$/.test(k)) { plm.error(k, `type conversion error from string ${JSON.stringify(k)} to port number`); continue; }
      const p = Number(k);
      if (p < 1 || p > 65535) { plm.rule('port must be between 1-65535'); continue; }
      portLevel.set(p, mode(plm.obj(k)));
    }
  }
  return { meta, selector, mode: mode(spec.obj('mtls')), portLevel };
}

const SOURCE_FIELDS = ['principals', 'notPrincipals', 'requestPrincipals', 'notRequestPrincipals', 'namespaces', 'notNamespaces', 'ipBlocks', 'notIpBlocks',
  'remoteIpBlocks', 'notRemoteIpBlocks', 'serviceAccounts', 'notServiceAccounts', 'trustDomains', 'notTrustDomains'] as const;
const OPERATION_FIELDS = ['hosts', 'notHosts', 'ports', 'notPorts', 'methods', 'notMethods', 'paths', 'notPaths'] as const;
/** `when` keys istiod knows (request.headers[...], request.auth.claims[...], experimental.envoy.filters.* take a suffix). */
const CONDITION_KEYS = ['source.ip', 'remote.ip', 'source.namespace', 'source.principal', 'source.serviceAccount', 'source.trustDomain', 'request.auth.principal',
  'request.auth.audiences', 'request.auth.presenter', 'destination.ip', 'destination.port', 'connection.sni'];

function checkValues(n: Node, field: string, values: readonly string[]): void {
  for (const v of values) if (v === '') n.error(field, `empty value not allowed, found in ${field}`);
}

/** Service accounts: `name` or `namespace/name`, no wildcards. */
function checkServiceAccounts(n: Node, field: string, values: readonly string[]): void {
  for (const v of values) {
    if (v.includes('*')) n.error(field, `wildcard not allowed, found in ${field}`);
    const parts = v.split('/');
    if (parts.length > 2 || parts.some((p) => p === '')) n.error(field, `expected format 'serviceAccount' or 'namespace/serviceAccount', found ${JSON.stringify(v)} in ${field}`);
  }
}

function source(n: Node, i: number): AuthzSource {
  n.known([...SOURCE_FIELDS]);
  const out: Record<string, string[]> = {};
  for (const f of SOURCE_FIELDS) { out[f] = n.strList(f); checkValues(n, f, out[f]); }
  if ((n.has('serviceAccounts') || n.has('notServiceAccounts')) && ['principals', 'notPrincipals', 'namespaces', 'notNamespaces'].some((k) => n.has(k))) {
    n.rule('Cannot set serviceAccounts with namespaces or principals');
  }
  for (const f of ['ipBlocks', 'notIpBlocks', 'remoteIpBlocks', 'notRemoteIpBlocks']) for (const v of out[f]) { const p = cidrProblem(v); if (p) n.error(f, p); }
  for (const f of ['serviceAccounts', 'notServiceAccounts']) {
    if (out[f].length > 16) n.error(f, `Too many: ${out[f].length}: must have at most 16 items`);
    checkServiceAccounts(n, f, out[f]);
  }
  for (const f of ['trustDomains', 'notTrustDomains']) {
    for (const v of out[f]) if (v !== '*' && v.slice(1, -1).includes('*')) n.error(f, `wildcard in the middle of ${JSON.stringify(v)} is not allowed, found in ${f}`);
  }
  if (SOURCE_FIELDS.every((f) => out[f].length === 0)) n.error('', `\`from.source\` must not be empty, found at rule ${i}`);
  return out as unknown as AuthzSource;
}

function operation(n: Node, i: number): AuthzOperation {
  n.known([...OPERATION_FIELDS]);
  const out: Record<string, string[]> = {};
  for (const f of OPERATION_FIELDS) { out[f] = n.strList(f); checkValues(n, f, out[f]); }
  for (const f of ['ports', 'notPorts']) {
    for (const p of out[f]) if (!/^\d+$/.test(p) || Number(p) > 65535) n.error(f, `invalid port ${p}: must be a number in 0..65535`);
  }
  for (const f of ['paths', 'notPaths']) {
    for (const p of out[f]) {
      const why = pathTemplateProblem(p);
      if (why) n.error(f, `invalid or unsupported path ${p}, found in ${f}. ${why}`);
      else if (p.includes('{*}') || p.includes('{**}')) n.notApplied(f, `path template ${p}: skua-proxy does not evaluate path templates yet, so an ALLOW rule using one is dropped and a DENY rule matches any path`);
    }
  }
  if (OPERATION_FIELDS.every((f) => out[f].length === 0)) n.error('', `\`to.operation\` must not be empty, found at rule ${i}`);
  return out as unknown as AuthzOperation;
}

/** Path templates: `{*}` segments, one `{**}` last; literals otherwise (istiod's CheckValidPathTemplate). */
function pathTemplateProblem(path: string): string | undefined {
  const template = path.includes('{*}') || path.includes('{**}');
  let sawAny = false;
  for (const glob of path.replace(/^\/+|\/+$/g, '').split('/')) {
    if (glob === '{*}' && !sawAny) continue;
    if (glob === '{**}' && !sawAny) { sawAny = true; continue; }
    if (glob === '{*}' || glob === '{**}') return '{**} is not the last operator';
    if (/[{}]/.test(glob)) return "Contains '{' or '}' beyond a supported path template";
    if (template && !/^[a-zA-Z0-9-._~%!$&'()+,;:@=]+$/.test(glob)) return `Contains segment ${glob} with invalid string literal`;
  }
  return undefined;
}

function condition(n: Node): AuthzCondition | undefined {
  n.known(['key', 'values', 'notValues']);
  const key = n.reqStr('key') ?? '';
  const values = n.strList('values'), notValues = n.strList('notValues');
  if (key === '') { n.error('key', '`key` must not be empty'); return undefined; }
  const known = CONDITION_KEYS.includes(key) || /^request\.headers\[[^\]]+\]$/.test(key) || /^request\.auth\.claims(\[[^\]]+\])+$/.test(key)
    || /^experimental\.envoy\.filters\.[^[]+\[[^\]]+\]$/.test(key);
  if (!known) n.error('key', `unknown attribute (${key})`);
  if (values.length === 0 && notValues.length === 0) n.error('', `at least one of \`values\` or \`notValues\` must be set for key ${key}`);
  for (const [what, list] of [['values', values], ['notValues', notValues]] as const) {
    for (const v of list) {
      if (v === '') n.error(what, `invalid \`${what === 'values' ? 'value' : 'notValue'}\` for \`key\` ${key}: empty value not allowed, found in ${key}`);
      if (key === 'source.serviceAccount') checkServiceAccounts(n, what, [v]);
      if ((key.endsWith('.ip')) && cidrProblem(v)) n.error(what, `invalid \`${what === 'values' ? 'value' : 'notValue'}\` for \`key\` ${key}: ${cidrProblem(v)}`);
      if (key === 'destination.port' && (!/^\d+$/.test(v) || Number(v) > 65535)) n.error(what, `invalid \`${what === 'values' ? 'value' : 'notValue'}\` for \`key\` ${key}: invalid port ${v}`);
    }
  }
  return { key, values, notValues };
}

export function readAuthorizationPolicy(meta: Meta, spec: Node): AuthorizationPolicy {
  spec.known(['selector', 'targetRef', 'targetRefs', 'rules', 'action', 'provider']);
  oneSelector(spec, 'selector', true);
  const action = spec.oneOf('action', ['ALLOW', 'DENY', 'AUDIT', 'CUSTOM'] as const) ?? 'ALLOW';
  if (action === 'CUSTOM') spec.error('action', 'CUSTOM authorization (ext_authz extension providers) is not supported by skua yet');
  if (action === 'AUDIT') spec.error('action', 'AUDIT needs a telemetry provider; it is not supported by skua yet');
  if (spec.has('provider') && action !== 'CUSTOM') spec.error('provider', `\`provider\` must not be with non CUSTOM action, found ${action}`);
  const rawRules = spec.rawList('rules');
  if (action === 'DENY' && rawRules.length === 0) spec.error('rules', 'DENY action without `rules` is meaningless as it will never be triggered, add an empty rule `{}` to deny all');
  const rules: AuthzRule[] = [];
  for (const [i, r] of spec.list('rules').entries()) {
    r.known(['from', 'to', 'when']);
    if (r.has('from') && r.rawList('from').length === 0) r.error('from', `\`from\` must not be empty, found at rule ${i}`);
    if (r.has('to') && r.rawList('to').length === 0) r.error('to', `\`to\` must not be empty, found at rule ${i}`);
    const from = r.list('from').map((f) => { f.known(['source']); const s = f.obj('source'); if (!s) { f.error('source', `\`from.source\` must not be nil, found at rule ${i}`); return undefined; } return source(s, i); });
    const to = r.list('to').map((t) => { t.known(['operation']); const o = t.obj('operation'); if (!o) { t.error('operation', `\`to.operation\` must not be nil, found at rule ${i}`); return undefined; } return operation(o, i); });
    const when = r.list('when').map(condition);
    rules.push({ from: from.filter((x) => x !== undefined), to: to.filter((x) => x !== undefined), when: when.filter((x) => x !== undefined) });
  }
  const dryRunRaw = meta.annotations['istio.io/dry-run'];
  if (dryRunRaw !== undefined && !['true', 'false'].includes(dryRunRaw)) spec.error('', `${meta.namespace}/${meta.name} has annotation istio.io/dry-run with invalid value (${dryRunRaw})`);
  // istiod warns when a DENY rule has only HTTP attributes: on TCP ports it then denies everything.
  if (action === 'DENY' && rules.some(httpOnly) && !spec.has('targetRef') && !spec.has('targetRefs')) {
    spec.warn('rules', 'configured AuthorizationPolicy will deny all traffic to TCP ports under its scope due to the use of only HTTP attributes in a DENY rule; it is recommended to explicitly specify the port');
  }
  return { meta, action, selector: matchLabels(spec), targetRefs: targetRefs(spec, meta.namespace), rules, dryRun: dryRunRaw === 'true' };
}

function httpOnly(r: AuthzRule): boolean {
  const tcpFrom = r.from.some((s) => ['principals', 'notPrincipals', 'ipBlocks', 'notIpBlocks', 'namespaces', 'notNamespaces', 'remoteIpBlocks', 'notRemoteIpBlocks', 'serviceAccounts', 'notServiceAccounts']
    .some((k) => (s as unknown as Record<string, string[]>)[k].length > 0));
  const tcpTo = r.to.some((o) => o.ports.length > 0 || o.notPorts.length > 0);
  return (r.from.length > 0 && r.to.length === 0 && !tcpFrom) || (r.to.length > 0 && !tcpTo);
}

export function readRequestAuthentication(meta: Meta, spec: Node): RequestAuthentication {
  spec.known(['selector', 'targetRef', 'targetRefs', 'jwtRules']);
  oneSelector(spec, 'selector');
  const jwtRules: JwtRule[] = [];
  for (const r of spec.list('jwtRules')) {
    r.known(['issuer', 'audiences', 'jwksUri', 'jwks_uri', 'jwks', 'fromHeaders', 'fromParams', 'fromCookies', 'outputPayloadToHeader', 'forwardOriginalToken', 'outputClaimToHeaders', 'timeout', 'spaceDelimitedClaims', 'presence'],
      { spaceDelimitedClaims: 'scope and permission are the space-delimited claims', presence: 'a missing token is allowed (AuthorizationPolicy can require one)' });
    const jwksUri = r.str('jwksUri') ?? r.str('jwks_uri');
    if ([r.has('jwksUri'), r.has('jwks_uri'), r.has('jwks')].filter(Boolean).length > 1) r.rule('only one of jwks or jwksUri can be set');
    if (jwksUri !== undefined && !/^https?:\/\//.test(jwksUri)) r.invalid('jwksUri', jwksUri, 'url must have scheme http:// or https://');
    const issuer = r.str('issuer') ?? '';
    if (issuer === '' && !jwksUri) r.error('issuer', 'issuer or jwksUri must be non-empty string');
    const audiences = r.strList('audiences');
    if (audiences.some((a) => a === '')) r.error('audiences', 'audience must be non-empty string');
    const jwks = r.str('jwks');
    if (jwks !== undefined) { try { JSON.parse(jwks); } catch (err) { r.error('jwks', `jwks parse error: ${(err as Error).message}`); } }
    if (r.has('fromCookies')) r.error('fromCookies', 'tokens from cookies are not supported by skua-proxy yet');
    const fromHeaders = r.list('fromHeaders').map((h) => {
      h.known(['name', 'prefix']);
      const name = h.reqStr('name') ?? '';
      if (name === '') h.error('name', 'location header name must be non-empty string');
      return { name, prefix: h.str('prefix') };
    });
    const fromParams = r.strList('fromParams');
    if (fromParams.some((p) => p === '')) r.error('fromParams', 'location query must be non-empty string');
    const outputClaimToHeaders = r.list('outputClaimToHeaders').map((c) => {
      c.known(['header', 'claim']);
      const header = c.reqStr('header') ?? '', claim = c.reqStr('claim') ?? '';
      if (header === '' || claim === '') c.rule('outputClaimToHeaders header and claim value must be non-empty string');
      else if (!/^[-_A-Za-z0-9]+$/.test(header)) c.invalid('header', header, 'should match \'^[-_A-Za-z0-9]+$\'');
      return { header, claim };
    });
    jwtRules.push({
      issuer, audiences, jwks, jwksUri, fromHeaders, fromParams, forwardOriginalToken: r.bool('forwardOriginalToken') ?? false,
      outputPayloadToHeader: r.str('outputPayloadToHeader'), outputClaimToHeaders, timeoutMs: r.duration('timeout'),
    });
  }
  return { meta, selector: matchLabels(spec), jwtRules };
}
