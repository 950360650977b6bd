/** Readers shared by the Istio kinds: string matches, destinations, selectors, hosts, header operations. */
import { isIP } from 'node:net';
import { Msg } from '@skua/proxy/core';
import { compileRe2 } from '@skua/proxy/matchers';
import type { Node } from '../reader.ts';
import type { Destination, HeaderOps, HeaderRewrites, Labels, PolicyTargetRef, StringMatch } from '../types.ts';

const DNS1123_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const HEADER_NAME = /^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$/;

export function isDns1123Label(s: string): boolean {
  return s.length <= 63 && DNS1123_LABEL.test(s);
}

/** istiod's ValidateWildcardDomain / FQDN check: `*`, `*.example.com`, `reviews`, `reviews.default.svc.cluster.local`. */
export function hostProblem(host: string): string | undefined {
  if (host === '*') return undefined;
  if (host.length > 255) return `domain name "${host}" too long (max 255)`;
  const rest = host.startsWith('*.') ? host.slice(2) : host;
  if (rest === '') return `domain name "${host}" invalid`;
  for (const label of rest.split('.')) {
    if (label.length === 0 || label.length > 63 || !/^[a-zA-Z0-9]([-a-zA-Z0-9]*[a-zA-Z0-9])?$/.test(label)) {
      return `domain name "${host}" invalid (label "${label}" invalid)`;
    }
  }
  return undefined;
}

/** An RE2 pattern the proxy can run; records the problem on `node.key`. */
export function checkRegex(node: Node, key: string, pattern: string): void {
  if (pattern === '') { node.error(key, `${JSON.stringify(key)}: regex string match should not be empty`); return; }
  if (pattern.length > 1024) { node.error(key, `${JSON.stringify(key)}: regex is too large, max length allowed is 1024`); return; }
  try {
    compileRe2(new Msg({ regex: pattern }, ''));
  } catch (err) {
    node.error(key, `${(err as Error).message.replace(/^regex: /, '')}; Istio uses RE2 style regex-based match (https://github.com/google/re2/wiki/Syntax)`);
  }
}

/** Istio's StringMatch: exactly one of exact / prefix / regex; `{}` (undefined result) means "present". */
export function stringMatch(n: Node | undefined, where: string): StringMatch | undefined {
  if (!n) return undefined;
  n.known(['exact', 'prefix', 'regex']);
  const set = (['exact', 'prefix', 'regex'] as const).filter((k) => n.has(k));
  if (set.length > 1) n.rule(`only one of exact, prefix or regex may be set, got ${set.join(', ')}`);
  const kind = set[0];
  if (!kind) return undefined;
  const value = n.str(kind) ?? '';
  if (kind === 'prefix' && value === '') n.error(kind, `${JSON.stringify(where)}: prefix string match should not be empty`);
  if (kind === 'regex') checkRegex(n, kind, value);
  return { kind, value };
}

/** A `name → StringMatch` map (headers, queryParams, withoutHeaders). */
export function matchMap(n: Node, key: string, validateName: boolean): Array<readonly [string, StringMatch | undefined]> {
  const m = n.obj(key);
  if (!m) return [];
  const out: Array<readonly [string, StringMatch | undefined]> = [];
  for (const name of Object.keys(m.raw)) {
    if (m.raw[name] === null) { m.error(name, `header match ${name} cannot be null`); continue; }
    if (validateName && !HEADER_NAME.test(name)) m.error(name, `header name ${name} is not a valid header name`);
    out.push([validateName ? name.toLowerCase() : name, stringMatch(m.obj(name), key)]);
  }
  return out;
}

export function port(n: Node, key: string): number | undefined {
  const v = n.int(key);
  if (v === undefined) return undefined;
  if (v < 1 || v > 65535) { n.invalid(key, v, 'port number must be in the range 1..65535'); return undefined; }
  return v;
}

/** Destination: host (required), subset, port.number. */
export function destination(n: Node | undefined): Destination | undefined {
  if (!n) return undefined;
  n.known(['host', 'subset', 'port']);
  const host = n.reqStr('host');
  if (host !== undefined) {
    const p = host === '*' ? `invalid destination host ${host}` : hostProblem(host) && `invalid destination host ${host}`;
    if (p) n.error('host', p);
  }
  const subset = n.str('subset');
  if (subset !== undefined && !isDns1123Label(subset)) n.error('subset', subset === '' ? 'subset name cannot be empty' : `subset name is invalid: ${subset}`);
  const ps = n.obj('port');
  ps?.known(['number']);
  const p = ps ? port(ps, 'number') : undefined;
  return host === undefined ? undefined : { host, subset: subset || undefined, port: p };
}

function headerOps(n: Node | undefined, request: boolean): HeaderOps | undefined {
  if (!n) return undefined;
  n.known(['set', 'add', 'remove']);
  const set = n.strMap('set'), add = n.strMap('add'), remove = n.strList('remove');
  for (const [what, names] of [['set', Object.keys(set)], ['add', Object.keys(add)], ['remove', remove]] as const) {
    for (const name of names) {
      if (name === '') n.error(what, 'header name cannot be empty');
      else if (name.startsWith(':')) n.error(what, `invalid header ${JSON.stringify(name)}: header cannot have ":" prefix`);
      else if (!request && name.toLowerCase() === 'host') n.error(what, `invalid header ${JSON.stringify(name)}: cannot set Host header`);
    }
  }
  return { set, add, remove };
}

export function headerRewrites(n: Node | undefined): HeaderRewrites | undefined {
  if (!n) return undefined;
  n.known(['request', 'response']);
  return { request: headerOps(n.obj('request'), true), response: headerOps(n.obj('response'), false) };
}

/** Label keys and values as Kubernetes accepts them; wildcards refused (Istio's selector rules). */
export function labels(n: Node, key: string, what = 'selector'): Labels {
  const out = n.strMap(key);
  for (const [k, v] of Object.entries(out)) {
    if (k === '') n.error(key, `empty key is not supported in ${what}: ${JSON.stringify(`${k}=${v}`)}`);
    else if (k.includes('*') || v.includes('*')) n.error(key, `wildcard is not supported in ${what}: ${JSON.stringify(`${k}=${v}`)}`);
    else if (!LABEL_NAME.test(k.slice(k.lastIndexOf('/') + 1))) n.error(key, `invalid label key ${JSON.stringify(k)}`);
    else if (v.length > 63 || (v !== '' && !LABEL_NAME.test(v))) n.error(key, `invalid label value ${JSON.stringify(v)}`);
  }
  return out;
}

/** `selector: { matchLabels }` (security kinds) → labels; undefined when absent. */
export function matchLabels(n: Node, key = 'selector'): Labels | undefined {
  const s = n.obj(key);
  if (!s) return undefined;
  s.known(['matchLabels']);
  return labels(s, 'matchLabels');
}

/**
 * `targetRef`/`targetRefs` and `selector` are exclusive. `applied`: the kind's targetRefs are read
 * (AuthorizationPolicy on waypoints); other kinds' are accepted and reported as not applied.
 */
export function oneSelector(n: Node, selectorKey: string, applied = false): void {
  const count = ['targetRef', 'targetRefs', selectorKey].filter((k) => n.has(k)).length;
  if (count > 1) n.rule(selectorKey === 'selector' ? 'only one of targetRefs or selector can be set' : 'only one of targetRefs or workloadSelector can be set');
  if (applied) return;
  for (const k of ['targetRef', 'targetRefs']) if (n.has(k)) n.notApplied(k, 'policies of this kind attached by targetRef are not applied yet (use a selector)');
}

const TARGET_KINDS = ['gateway.networking.k8s.io/Gateway', '/Service', 'networking.istio.io/ServiceEntry', 'gateway.networking.k8s.io/GatewayClass'];

/** targetRef / targetRefs (Istio's PolicyTargetReference): group, kind, name; the namespace must be the policy's own. */
export function targetRefs(n: Node, ownNamespace: string): PolicyTargetRef[] {
  const refs = [...(n.has('targetRef') ? [n.obj('targetRef')] : []), ...n.list('targetRefs')].filter((r) => r !== undefined);
  return refs.map((r) => {
    r.known(['group', 'kind', 'name', 'namespace']);
    const group = r.str('group') ?? '', kind = r.reqStr('kind') ?? '', name = r.reqStr('name') ?? '';
    if (kind && !TARGET_KINDS.includes(`${group === 'core' ? '' : group}/${kind}`)) r.error('kind', `targetRef ${group}/${kind} is not supported: a waypoint Gateway, a Service or a ServiceEntry (or the istio-waypoint GatewayClass)`);
    const ns = r.str('namespace');
    if (ns !== undefined && ns !== ownNamespace) r.error('namespace', `cross namespace referencing is not currently supported (policy in ${ownNamespace}, target in ${ns})`);
    return { group: group === 'core' ? '' : group, kind, name };
  });
}

/** ipBlocks / CIDRs: "1.2.3.4" or "10.0.0.0/8". */
export function cidrProblem(v: string): string | undefined {
  const [ip, len, extra] = v.split('/');
  if (extra !== undefined || !isIP(ip)) return `invalid IP address or CIDR range: ${JSON.stringify(v)}`;
  if (len !== undefined && (!/^\d+$/.test(len) || Number(len) > (isIP(ip) === 4 ? 32 : 128))) return `invalid IP address or CIDR range: ${JSON.stringify(v)}`;
  return undefined;
}

/** `exportTo`: `*`, `.`, `~` or namespaces. */
export function exportTo(n: Node): string[] {
  const list = n.strList('exportTo');
  const seen = new Set<string>();
  for (const e of list) {
    if (seen.has(e)) n.error('exportTo', `duplicate entries in exportTo for entry ${e}`);
    seen.add(e);
    if (e !== '*' && e !== '.' && e !== '~' && !isDns1123Label(e)) n.error('exportTo', `only .,*,~ or a valid DNS 1123 label is allowed as exportTo entry, got ${JSON.stringify(e)}`);
  }
  if (seen.has('*') && seen.size > 1) n.error('exportTo', 'cannot have both public (*) and non-public exportTo values for a resource');
  return list;
}
