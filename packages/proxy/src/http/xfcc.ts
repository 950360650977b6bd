/**
 * x-forwarded-client-cert (XFCC), as the HCM's forward_client_cert_details and
 * set_current_client_cert_details say (istiod: APPEND_FORWARD with subject, dns and uri on
 * sidecar inbound). The current element describes the downstream mTLS peer:
 * `By=<our URI SAN>;Hash=<sha256 of the peer cert>;Cert="…";Subject="…";URI=…;DNS=…`.
 */
import type { PeerCertificate } from 'node:tls';
import type { Msg } from '../config/fields.ts';
import type { ConnInfo } from '../listener/conn-info.ts';
import type { Headers } from './exchange.ts';

const MODES = ['SANITIZE', 'FORWARD_ONLY', 'APPEND_FORWARD', 'SANITIZE_SET', 'ALWAYS_FORWARD_ONLY'] as const;
export type XfccMode = (typeof MODES)[number];

export interface XfccConfig {
  readonly mode: XfccMode;
  readonly subject: boolean;
  readonly cert: boolean;
  readonly chain: boolean;
  readonly dns: boolean;
  readonly uri: boolean;
}

const XFCC = 'x-forwarded-client-cert';

export function compileXfcc(m: Msg): XfccConfig {
  const mode = m.enumOf('forward_client_cert_details', MODES);
  const d = m.msg('set_current_client_cert_details');
  if (d?.has('chain') && d.bool('chain')) throw d.error('chain', 'is not supported yet (the peer chain is not kept)');
  return { mode, subject: d?.bool('subject') ?? false, cert: d?.bool('cert') ?? false, chain: false, dns: d?.bool('dns') ?? false, uri: d?.bool('uri') ?? false };
}

/** Rewrites the request's XFCC header in place. */
export function applyXfcc(headers: Headers, conn: ConnInfo, c: XfccConfig): void {
  const mtls = conn.peerCertificate !== undefined;
  switch (c.mode) {
    case 'ALWAYS_FORWARD_ONLY': return;
    case 'FORWARD_ONLY': if (!mtls) strip(headers); return;
    case 'SANITIZE': strip(headers); return;
    case 'APPEND_FORWARD': case 'SANITIZE_SET': {
      if (!mtls) { strip(headers); return; }
      const current = element(conn, c);
      const prior = headers[XFCC];
      headers[XFCC] = c.mode === 'APPEND_FORWARD' && prior ? `${Array.isArray(prior) ? prior.join(',') : prior},${current}` : current;
    }
  }
}

/** Only delete when present: deleting keys turns header objects into slow dictionaries. */
function strip(headers: Headers): void {
  if (headers[XFCC] !== undefined) delete headers[XFCC];
}

/**
 * The current element depends only on the connection's certificates and the config: made once per
 * connection (a regex replace and several strings per request otherwise, issue 13).
 */
const elements = new WeakMap<ConnInfo, { readonly c: XfccConfig; readonly value: string }>();

function element(conn: ConnInfo, c: XfccConfig): string {
  const cached = elements.get(conn);
  if (cached?.c === c) return cached.value;
  const value = makeElement(conn, c);
  elements.set(conn, { c, value });
  return value;
}

function makeElement(conn: ConnInfo, c: XfccConfig): string {
  const cert = conn.peerCertificate as PeerCertificate;
  const parts: string[] = [];
  const by = conn.localUriSans?.[0];
  if (by) parts.push(`By=${by}`);
  parts.push(`Hash=${(cert.fingerprint256 ?? '').replace(/:/g, '').toLowerCase()}`);
  if (c.cert && cert.raw) parts.push(`Cert="${encodeURIComponent(pem(cert.raw))}"`);
  if (c.subject) parts.push(`Subject="${subjectOf(cert)}"`);
  if (c.uri) for (const u of conn.peerUriSans) parts.push(`URI=${u}`);
  if (c.dns) for (const s of (cert.subjectaltname ?? '').split(', ')) if (s.startsWith('DNS:')) parts.push(`DNS=${s.slice(4)}`);
  return parts.join(';');
}

/** RFC 2253 order: most specific attribute first. */
export function subjectOf(cert: PeerCertificate): string {
  const s = cert.subject as unknown as Record<string, string | string[]> | undefined;
  if (!s) return '';
  return Object.entries(s).reverse().map(([k, v]) => `${k}=${Array.isArray(v) ? v.join('+') : v}`).join(',');
}

/** DER as PEM (64-column base64, trailing newline), as Envoy prints certificates. */
export function pem(der: Buffer): string {
  return `-----BEGIN CERTIFICATE-----\n${der.toString('base64').replace(/(.{64})/g, '$1\n').replace(/\n$/, '')}\n-----END CERTIFICATE-----\n`;
}
