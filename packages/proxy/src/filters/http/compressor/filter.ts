import type { Transform } from 'node:stream';
import type { Exchange, Headers } from '../../../http/exchange.ts';
import type { RequestRecord } from '../../../http/request-record.ts';
import type { BodyEncoder } from '../../../http/body-encoder.ts';
import type { Counter } from '../../../stats/store.ts';
import type { FilterCallbacks, FilterStatus, HttpFilterScope, LiveHttpFilter } from '../types.ts';
import type { CompressorConfig } from './config.ts';

/** The compressors of one request's chain, in order, and the Accept-Encoding they negotiate over. */
interface Negotiation {
  readonly acceptEncoding: string | undefined;
  readonly members: CompressorConfig[];
  /** The encoding chosen, once a compressor asked ('' = none). */
  chosen: string | undefined;
}
const NEGOTIATION = 'envoy.compression.compressor.negotiation';

class CompressorStats {
  readonly compressed: Counter; readonly notCompressed: Counter; readonly noAcceptHeader: Counter;
  readonly tooSmall: Counter; readonly etag: Counter; readonly uncompressedBytes: Counter; readonly compressedBytes: Counter;
  constructor(scope: HttpFilterScope, config: CompressorConfig) {
    const s = scope.store.scope('http', 'envoy_http_conn_manager_prefix', scope.statPrefix);
    const c = (n: string): Counter => s.counter(`compressor.${config.libraryName}.${config.library.statPrefix}.${n}`);
    this.compressed = c('compressed'); this.notCompressed = c('not_compressed'); this.noAcceptHeader = c('no_accept_header');
    this.tooSmall = c('content_length_too_small'); this.etag = c('not_compressed_etag');
    this.uncompressedBytes = c('total_uncompressed_bytes'); this.compressedBytes = c('total_compressed_bytes');
  }
}

function header(h: Headers, name: string): string | undefined {
  const v = h[name];
  return typeof v === 'string' ? v : Array.isArray(v) ? v.join(',') : v === undefined ? undefined : String(v);
}

export class LiveCompressor implements LiveHttpFilter {
  private readonly config: CompressorConfig;
  private readonly stats: CompressorStats;
  constructor(config: CompressorConfig, scope: HttpFilterScope) {
    this.config = config;
    this.stats = new CompressorStats(scope, config);
  }

  decodeHeaders(cb: FilterCallbacks): FilterStatus {
    if (!this.config.enabled) return 'continue';
    const state = (cb.rec.filterState ??= new Map());
    let n = state.get(NEGOTIATION) as Negotiation | undefined;
    if (!n) { n = { acceptEncoding: header(cb.ex.headers, 'accept-encoding'), members: [], chosen: undefined }; state.set(NEGOTIATION, n); }
    n.members.push(this.config);
    if (this.config.removeAcceptEncoding) cb.ex.headers['accept-encoding'] = undefined;
    return 'continue';
  }

  encodeHeaders(cb: FilterCallbacks, status: number, h: Headers): void {
    const rec = cb.rec;
    const n = rec.filterState?.get(NEGOTIATION) as Negotiation | undefined;
    if (!n || !n.members.includes(this.config) || rec.bodyEncoder !== undefined) return;
    const stats = this.stats;
    if (!this.compressible(rec, status, h)) { stats.notCompressed.inc(); return; }
    appendVary(h);
    if (n.acceptEncoding === undefined) { stats.noAcceptHeader.inc(); stats.notCompressed.inc(); return; }
    n.chosen ??= chooseEncoding(n.acceptEncoding, n.members);
    if (n.chosen !== this.config.library.encoding) { stats.notCompressed.inc(); return; }
    const etag = header(h, 'etag');
    if (etag !== undefined && !etag.startsWith('W/')) h.etag = `W/${etag}`;
    h['content-length'] = undefined;
    h['content-encoding'] = this.config.library.encoding;
    stats.compressed.inc();
    rec.bodyEncoder = new StreamEncoder(this.config, stats);
  }

  /** Envoy's checks: a body is coming, its type is listed, it is big enough, nobody encoded or forbade it. */
  private compressible(rec: RequestRecord, status: number, h: Headers): boolean {
    const c = this.config;
    if (rec.ex.method === 'HEAD' || rec.ex.method === 'CONNECT' || status < 200 || status === 204 || status === 304) return false;
    if (header(h, 'upgrade') !== undefined) return false;
    const len = header(h, 'content-length');
    if (len !== undefined && Number(len) < c.minContentLength) { this.stats.tooSmall.inc(); return false; }
    const ct = header(h, 'content-type');
    if (ct !== undefined && ct !== '') {
      const semi = ct.indexOf(';');
      if (!c.contentTypes.has((semi < 0 ? ct : ct.slice(0, semi)).trim().toLowerCase())) return false;
    }
    if (/(^|,)\s*no-transform\s*(,|$)/i.test(header(h, 'cache-control') ?? '')) return false;
    const ce = header(h, 'content-encoding');
    if (ce !== undefined && ce !== '' && ce.toLowerCase() !== 'identity') return false;
    if (/gzip|deflate|br|zstd|compress/i.test(header(h, 'transfer-encoding') ?? '')) return false;
    if (c.disableOnEtag && header(h, 'etag') !== undefined) { this.stats.etag.inc(); return false; }
    return true;
  }
}

function appendVary(h: Headers): void {
  const vary = header(h, 'vary');
  if (vary === undefined || vary === '') { h.vary = 'Accept-Encoding'; return; }
  if (!/(^|,)\s*(accept-encoding|\*)\s*(,|$)/i.test(vary)) h.vary = `${vary}, Accept-Encoding`;
}

/**
 * The encoding among the chain's compressors the client prefers: highest q (an explicit token,
 * else `*`; q=0 refuses), ties to the earliest compressor unless a later one has choose_first; ''
 * when the client prefers identity or takes none of them.
 */
export function chooseEncoding(acceptEncoding: string, members: readonly CompressorConfig[]): string {
  const q = new Map<string, number>();
  for (const part of acceptEncoding.split(',')) {
    const [token, ...params] = part.split(';');
    const name = token.trim().toLowerCase();
    if (!name) continue;
    let value = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/i.exec(p);
      if (m) value = Number(m[1]);
    }
    if (!Number.isFinite(value) || value < 0 || value > 1) continue;
    q.set(name, value);
  }
  const wildcard = q.get('*');
  let best = '', bestQ = 0;
  for (const m of members) {
    const v = q.get(m.library.encoding) ?? wildcard ?? 0;
    // A later compressor takes an equal q only with choose_first (so the last such one wins).
    if (v > bestQ || (v > 0 && v === bestQ && m.chooseFirst)) { best = m.library.encoding; bestQ = v; }
  }
  const identity = q.get('identity');
  if (identity !== undefined && identity > bestQ) return '';
  return best;
}

/** One response's compression stream, with backpressure both ways (downstream full, compressor full). */
class StreamEncoder implements BodyEncoder {
  private readonly config: CompressorConfig;
  private readonly stats: CompressorStats;
  private z: Transform | undefined;
  private ex: Exchange | undefined;
  private rec: RequestRecord | undefined;
  private resume: (() => void) | undefined;
  private full = false;
  private ended = false;

  constructor(config: CompressorConfig, stats: CompressorStats) {
    this.config = config;
    this.stats = stats;
  }

  start(ex: Exchange, rec: RequestRecord, resume: () => void): void {
    this.ex = ex; this.rec = rec; this.resume = resume;
    const z = this.config.library.create();
    this.z = z;
    z.on('data', (out: Buffer) => {
      rec.bytesSent += out.length;
      this.stats.compressedBytes.inc(out.length);
      if (!ex.write(out)) { this.full = true; z.pause(); }
    });
    z.on('drain', () => { if (!this.full) this.resume?.(); });
    z.on('error', () => ex.reset());
  }

  write(chunk: Buffer): boolean {
    this.stats.uncompressedBytes.inc(chunk.length);
    const z = this.z!;
    const roomInCompressor = z.write(chunk);
    return roomInCompressor && !this.full;
  }

  drained(): void {
    if (!this.full) return;
    this.full = false;
    this.z?.resume();
  }

  end(trailers: Headers | undefined, done: () => void): void {
    if (this.ended) return;
    this.ended = true;
    const z = this.z!;
    z.once('end', () => { this.ex!.end(trailers); done(); });
    z.end();
  }

  encodeAll(body: Buffer): Buffer {
    this.stats.uncompressedBytes.inc(body.length);
    const out = this.config.library.compressAll(body);
    this.stats.compressedBytes.inc(out.length);
    return out;
  }
}
