import type { Msg } from '../../config/fields.ts';
import type { ConnInfo } from '../../listener/conn-info.ts';
import type { RequestRecord } from '../../http/request-record.ts';
import { localNode } from '../../core/node.ts';
import type { PeerInfo } from './peer.ts';

/**
 * The plain attribute-path subset of CEL that Istio's docs use in stats `dimensions` and
 * `definitions`: literals, `request.host`, `request.headers['x']`, `upstream_peer.labels['app'].value`,
 * `string(destination.port)`. Anything else (operators, ternaries, has(), other functions) is
 * refused at config time with the field's path rather than evaluated wrongly.
 */
export interface AttrContext {
  readonly conn: ConnInfo;
  readonly rec: RequestRecord | undefined;
  readonly downstreamPeer: PeerInfo | null;
  readonly upstreamPeer: PeerInfo | null;
  readonly upstreamCluster: string;
}

/** A compiled expression: its value as text, or undefined when it does not resolve (reported as "unknown"). */
export type Attr = (c: AttrContext) => string | number | boolean | undefined;

type Step = { kind: 'field'; name: string } | { kind: 'index'; key: string };

const TOKEN = /\s*(?:(\d+)|'((?:[^'\\]|\\.)*)'|"((?:[^"\\]|\\.)*)"|([A-Za-z_][A-Za-z0-9_]*)|(\.|\[|\]|\(|\)))/y;

function parse(expr: string): { literal?: string | number; func?: string; root?: string; steps: Step[] } | string {
  const toks: Array<{ t: 'num' | 'str' | 'id' | 'p'; v: string }> = [];
  TOKEN.lastIndex = 0;
  let pos = 0;
  while (pos < expr.length) {
    if (/^\s*$/.test(expr.slice(pos))) break;
    TOKEN.lastIndex = pos;
    const m = TOKEN.exec(expr);
    if (!m) return `unexpected '${expr.slice(pos).trim()[0]}' at offset ${pos}`;
    pos = TOKEN.lastIndex;
    if (m[1] !== undefined) toks.push({ t: 'num', v: m[1] });
    else if (m[2] !== undefined) toks.push({ t: 'str', v: m[2].replace(/\\(.)/g, '$1') });
    else if (m[3] !== undefined) toks.push({ t: 'str', v: m[3].replace(/\\(.)/g, '$1') });
    else if (m[4] !== undefined) toks.push({ t: 'id', v: m[4] });
    else toks.push({ t: 'p', v: m[5] });
  }
  if (toks.length === 0) return 'empty expression';
  let i = 0;
  let func: string | undefined;
  if (toks.length >= 3 && toks[0].t === 'id' && toks[1].v === '(' && toks[toks.length - 1].v === ')') {
    func = toks[0].v;
    if (func !== 'string') return `function ${func}() is not supported (only string())`;
    toks.pop();
    i = 2;
  }
  if (toks.length - i === 1 && (toks[i].t === 'str' || toks[i].t === 'num')) {
    return { literal: toks[i].t === 'num' ? Number(toks[i].v) : toks[i].v, func, steps: [] };
  }
  if (toks[i]?.t !== 'id') return 'expected a literal or an attribute path';
  const root = toks[i++].v;
  const steps: Step[] = [];
  while (i < toks.length) {
    const t = toks[i];
    if (t.v === '.' && toks[i + 1]?.t === 'id') { steps.push({ kind: 'field', name: toks[i + 1].v }); i += 2; continue; }
    if (t.v === '[' && toks[i + 1]?.t === 'str' && toks[i + 2]?.v === ']') { steps.push({ kind: 'index', key: toks[i + 1].v }); i += 3; continue; }
    return `unsupported syntax near '${t.v}' (only attribute paths, ['key'] lookups and string())`;
  }
  return { func, root, steps };
}

function field(steps: Step[], n: number): string | undefined {
  const s = steps[n];
  return s?.kind === 'field' ? s.name : undefined;
}
function index(steps: Step[], n: number): string | undefined {
  const s = steps[n];
  return s?.kind === 'index' ? s.key : undefined;
}

function header(v: string | string[] | number | undefined): string | undefined {
  return v === undefined ? undefined : Array.isArray(v) ? v.join(',') : String(v);
}

function grpcStatus(rec: RequestRecord | undefined): number | undefined {
  const v = rec?.responseTrailers?.['grpc-status'] ?? rec?.responseHeaders?.['grpc-status'];
  const s = header(v);
  return s !== undefined && /^\d+$/.test(s) ? Number(s) : undefined;
}

/** The resolver for a parsed path, or an error message. */
function resolver(root: string, steps: Step[]): Attr | string {
  const f0 = field(steps, 0);
  const n = steps.length;
  switch (root) {
    case 'request': {
      if (f0 === 'headers' && n === 2 && index(steps, 1) !== undefined) {
        const key = (index(steps, 1) as string).toLowerCase();
        return (c) => key === ':authority' || key === 'host' ? c.rec?.ex.authority : c.rec?.requestHeader(key);
      }
      if (n !== 1) break;
      switch (f0) {
        case 'host': return (c) => c.rec?.ex.authority;
        case 'path': return (c) => c.rec?.originalPath;
        case 'url_path': return (c) => c.rec?.originalPath.split('?')[0];
        case 'method': return (c) => c.rec?.ex.method;
        case 'scheme': return (c) => c.rec?.ex.scheme;
        case 'protocol': return (c) => c.rec?.ex.protocol;
        case 'id': return (c) => c.rec?.requestId || c.rec?.requestHeader('x-request-id');
        case 'useragent': return (c) => c.rec?.userAgent || undefined;
        case 'referer': return (c) => c.rec?.requestHeader('referer');
        case 'size': case 'total_size': return (c) => c.rec?.bytesReceived;
        case 'duration': return (c) => (c.rec ? Math.round(c.rec.durationMs) : undefined);
      }
      break;
    }
    case 'response': {
      if ((f0 === 'headers' || f0 === 'trailers') && n === 2 && index(steps, 1) !== undefined) {
        const key = (index(steps, 1) as string).toLowerCase();
        return f0 === 'headers' ? (c) => c.rec?.responseHeader(key) : (c) => header(c.rec?.responseTrailers?.[key]);
      }
      if (n !== 1) break;
      switch (f0) {
        case 'code': return (c) => c.rec?.status;
        case 'code_details': return (c) => c.rec?.details || undefined;
        case 'flags': return (c) => c.rec?.flags;
        case 'grpc_status': return (c) => grpcStatus(c.rec);
        case 'size': case 'total_size': return (c) => c.rec?.bytesSent;
      }
      break;
    }
    case 'source':
      if (n === 1 && f0 === 'address') return (c) => c.conn.remoteAddress;
      if (n === 1 && f0 === 'port') return (c) => c.conn.remotePort;
      if (n === 1 && f0 === 'principal') return (c) => c.conn.peerUriSans[0];
      break;
    case 'destination':
      if (n === 1 && f0 === 'address') return (c) => c.conn.originalDst.address;
      if (n === 1 && f0 === 'port') return (c) => c.conn.originalDst.port;
      break;
    case 'connection':
      if (n === 1 && f0 === 'mtls') return (c) => c.conn.tls && c.conn.peerUriSans.length > 0;
      if (n === 1 && f0 === 'requested_server_name') return (c) => c.conn.serverName;
      if (n === 1 && f0 === 'id') return (c) => c.conn.id;
      break;
    case 'upstream':
      if (n === 1 && (f0 === 'address' || f0 === 'port')) {
        const port = f0 === 'port';
        return (c) => {
          const hp = c.rec?.upstreamHost;
          if (!hp) return undefined;
          const at = hp.lastIndexOf(':');
          return port ? Number(hp.slice(at + 1)) : hp.slice(0, at);
        };
      }
      break;
    case 'xds':
      if (n === 1 && f0 === 'cluster_name') return (c) => c.upstreamCluster || undefined;
      if (n === 1 && f0 === 'route_name') return (c) => c.rec?.routeName || undefined;
      break;
    case 'node':
      if (n === 1 && f0 === 'id') return () => localNode().id;
      if (n === 1 && f0 === 'cluster') return () => localNode().cluster;
      if (f0 === 'metadata' && n === 2 && index(steps, 1) !== undefined) {
        const key = index(steps, 1) as string;
        return () => { const v = localNode().metadata[key]; return typeof v === 'string' || typeof v === 'number' || typeof v === 'boolean' ? v : undefined; };
      }
      break;
    case 'upstream_peer':
    case 'downstream_peer':
      return peerResolver(root === 'upstream_peer', steps);
  }
  return `unsupported attribute ${root}${steps.map((s) => (s.kind === 'field' ? `.${s.name}` : `['${s.key}']`)).join('')}`;
}

const PEER_FIELDS: Record<string, (p: PeerInfo) => string> = {
  name: (p) => p.name,
  namespace: (p) => p.namespace,
  workload_name: (p) => p.workloadName,
  cluster_id: (p) => p.clusterId,
  mesh_id: (p) => p.meshId,
  owner: (p) => (typeof p.metadata.OWNER === 'string' ? p.metadata.OWNER : ''),
  istio_version: (p) => (typeof p.metadata.ISTIO_VERSION === 'string' ? p.metadata.ISTIO_VERSION : ''),
};

function peerResolver(upstream: boolean, steps: Step[]): Attr | string {
  const pick = upstream ? (c: AttrContext) => c.upstreamPeer : (c: AttrContext) => c.downstreamPeer;
  const f0 = field(steps, 0);
  // labels['k'] or labels['k'].value (the peer schema stores labels as key/value entries).
  if (f0 === 'labels' && index(steps, 1) !== undefined && (steps.length === 2 || (steps.length === 3 && field(steps, 2) === 'value'))) {
    const key = index(steps, 1) as string;
    return (c) => pick(c)?.labels[key];
  }
  const get = f0 !== undefined && steps.length === 1 ? PEER_FIELDS[f0] : undefined;
  if (get) return (c) => { const p = pick(c); return p ? get(p) || undefined : undefined; };
  return `unsupported peer attribute ${steps.map((s) => (s.kind === 'field' ? `.${s.name}` : `['${s.key}']`)).join('')}`;
}

/** Attributes whose values are numbers (usable as a definition's value). */
const NUMERIC = new Set(['request.size', 'request.total_size', 'request.duration', 'response.code', 'response.size', 'response.total_size',
  'response.grpc_status', 'source.port', 'destination.port', 'upstream.port', 'connection.id']);

/** Compiles `m[key]` (an expression string); `numeric` requires a number-valued result (definitions). */
export function compileAttribute(m: Msg, key: string, expr: string, numeric = false): Attr {
  const p = parse(expr);
  if (typeof p === 'string') throw m.error(key, `unsupported CEL expression ${JSON.stringify(expr)}: ${p}`);
  if (p.literal !== undefined) {
    if (numeric && typeof p.literal !== 'number') throw m.error(key, `expected a number-valued expression, got ${JSON.stringify(expr)}`);
    const lit = p.func === 'string' ? String(p.literal) : p.literal;
    return () => lit;
  }
  const r = resolver(p.root as string, p.steps);
  if (typeof r === 'string') throw m.error(key, `unsupported CEL expression ${JSON.stringify(expr)}: ${r}`);
  const path = `${p.root}${p.steps.map((s) => (s.kind === 'field' ? `.${s.name}` : '[]')).join('')}`;
  if (numeric && (p.func === 'string' || !NUMERIC.has(path))) throw m.error(key, `expected a number-valued expression, got ${JSON.stringify(expr)}`);
  if (p.func === 'string') return (c) => { const v = r(c); return v === undefined ? undefined : String(v); };
  return r;
}
