import type { Exchange } from '../../../http/exchange.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import type { BodyPrefix } from '../../../http/buffered-body.ts';
import type { ConnInfo } from '../../../listener/conn-info.ts';
import { pem, subjectOf } from '../../../http/xfcc.ts';
import { localNode } from '../../../core/node.ts';
import { structPlain } from '../../../xds/encode.ts';
import type { BodySettings, ExtAuthzConfig } from './config.ts';
import type { HeaderPair } from './result.ts';

type Json = Record<string, unknown>;

/** Envoy's marker header: whether the body in the check is cut at max_request_bytes. */
export const PARTIAL_BODY_HEADER = 'x-envoy-auth-partial-body';

/** What one check is made of besides the config. */
export interface CheckInput {
  readonly ex: Exchange;
  readonly rec: RequestRecord;
  readonly streamId: string;
  readonly body: BodyPrefix | undefined;
  readonly bodySettings: BodySettings | undefined;
  readonly contextExtensions: Readonly<Record<string, string>>;
}

/** Headers Envoy's codecs strip before any filter sees the request (Host becomes :authority). */
const CONNECTION_ONLY = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding']);

/** The body as the check carries it: at most max_request_bytes, and whether it was cut. */
export function checkBody(input: CheckInput): { data: Buffer; partial: boolean } | undefined {
  const b = input.body, s = input.bodySettings;
  if (!b || !s) return undefined;
  const all = b.chunks.length === 1 ? b.chunks[0] : Buffer.concat(b.chunks as Buffer[], b.size);
  return all.length > s.maxBytes ? { data: all.subarray(0, s.maxBytes), partial: true } : { data: all, partial: false };
}

/**
 * The request's headers as the check lists them (Envoy's header map order: pseudo-headers first;
 * repeated headers comma-joined), after allowed_headers / disallowed_headers, plus
 * x-envoy-auth-partial-body when a body is sent (a client's own copy of it is dropped).
 */
export function checkHeaders(c: ExtAuthzConfig, ex: Exchange, partial: boolean | undefined): HeaderPair[] {
  const out: HeaderPair[] = [];
  const push = (k: string, v: string): void => {
    if (c.disallowedHeaders?.(k)) return;
    if (c.allowedHeaders && !c.allowedHeaders(k)) return;
    out.push([k, v]);
  };
  push(':authority', ex.authority);
  push(':path', ex.path);
  push(':method', ex.method);
  push(':scheme', ex.scheme);
  const h = ex.headers;
  for (const k in h) {
    const v = h[k];
    if (v === undefined || k === PARTIAL_BODY_HEADER || k === 'host' || CONNECTION_ONLY.has(k)) continue;
    push(k, Array.isArray(v) ? v.join(',') : v);
  }
  if (partial !== undefined) out.push([PARTIAL_BODY_HEADER, partial ? 'true' : 'false']);
  return out;
}

function address(ip: string, port: number): Json {
  return { socket_address: { address: ip, port_value: port } };
}

/** The peer's principal as Envoy picks it: first URI SAN, else first DNS SAN, else the subject. */
function peerPrincipal(conn: ConnInfo): string {
  if (conn.peerUriSans.length) return conn.peerUriSans[0];
  const cert = conn.peerCertificate;
  if (!cert) return '';
  for (const s of (cert.subjectaltname ?? '').split(', ')) if (s.startsWith('DNS:')) return s.slice(4);
  return subjectOf(cert);
}

function destinationLabels(key: string): Record<string, string> | undefined {
  if (!key) return undefined;
  const v = localNode().metadata[key];
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return undefined;
  const out: Record<string, string> = {};
  for (const [k, x] of Object.entries(v as Json)) if (typeof x === 'string') out[k] = x;
  return out;
}

/** envoy.service.auth.v3.CheckRequest as the plain object protobufjs encodes (field names as in the .proto). */
export function buildCheckRequest(c: ExtAuthzConfig, input: CheckInput): Json {
  const { ex, rec } = input;
  const conn = ex.conn;
  const body = checkBody(input);
  const headers = checkHeaders(c, ex, body?.partial);
  const http: Json = {
    id: input.streamId, method: ex.method, path: ex.path, host: ex.authority, scheme: ex.scheme,
    size: body ? input.body?.size ?? 0 : 0, protocol: ex.protocol,
  };
  if (c.encodeRawHeaders) http.header_map = { headers: headers.map(([key, v]) => ({ key, raw_value: Buffer.from(v, 'latin1') })) };
  else {
    const map: Record<string, string> = {};
    for (const [k, v] of headers) map[k] = map[k] === undefined ? v : `${map[k]},${v}`;
    http.headers = map;
  }
  if (body) {
    if (input.bodySettings?.packAsBytes) http.raw_body = body.data;
    else http.body = body.data.toString('utf8');
  }
  const source: Json = { address: address(conn.remoteAddress, conn.remotePort) };
  const destination: Json = { address: address(conn.originalDst.address, conn.originalDst.port) };
  if (conn.tls) {
    source.principal = peerPrincipal(conn);
    destination.principal = conn.localUriSans?.[0] ?? '';
    if (c.includePeerCertificate && conn.peerCertificate?.raw) source.certificate = encodeURIComponent(pem(conn.peerCertificate.raw));
  }
  const service = ex.headers['x-envoy-downstream-service-cluster'];
  if (typeof service === 'string' && service) source.service = service;
  const labels = destinationLabels(c.labelsKey);
  if (labels) destination.labels = labels;
  const ms = rec.startTime;
  const attributes: Json = {
    source, destination,
    request: { time: { seconds: Math.floor(ms / 1000), nanos: (ms % 1000) * 1e6 }, http },
    context_extensions: input.contextExtensions,
  };
  if (c.metadataNamespaces.length && (rec.metadata || conn.metadata)) {
    // Connection metadata first, the request's own wins (Envoy).
    const fm: Json = {};
    for (const ns of c.metadataNamespaces) {
      const v = rec.metadata?.get(ns) ?? conn.metadata?.get(ns);
      if (v) fm[ns] = structPlain(v);
    }
    attributes.metadata_context = { filter_metadata: fm };
  }
  if (c.includeTlsSession && conn.serverName) attributes.tls_session = { sni: conn.serverName };
  return { attributes };
}
