/**
 * Queries the DNS proxy does not own go to the pod's resolvers (resolv.conf's nameservers,
 * in order, the next one on a failure) over the protocol the client used, each from a socket
 * of its own (a fresh source port and id, so replies cannot be confused). Good answers are
 * cached in a bounded LRU for their smallest TTL (NXDOMAIN / empty answers for the SOA's
 * negative TTL), capped so a resolver's change is seen within a minute.
 */
import { createSocket } from 'node:dgram';
import { connect } from 'node:net';
import { LRUCache } from 'lru-cache';
import { agedCopy, responseInfo, RCODE, type Question } from './wire.ts';

export interface Upstream {
  readonly host: string;
  readonly port: number;
}

export interface ForwarderOptions {
  readonly servers: readonly Upstream[];
  readonly timeoutMs?: number;
  /** Entries in the answer cache (0 disables it). */
  readonly cacheEntries?: number;
  /** TTL cap for cached answers, seconds. */
  readonly maxTtlSec?: number;
}

interface Cached {
  readonly bytes: Buffer;
  readonly at: number;
}

const NEGATIVE_TTL_DEFAULT = 5;

/** `nameserver` / `search` lines of a resolv.conf. */
export function readResolvConf(text: string): { servers: Upstream[]; search: string[] } {
  const servers: Upstream[] = [];
  let search: string[] = [];
  for (const line of text.split('\n')) {
    const f = line.trim().split(/\s+/);
    if (f[0] === 'nameserver' && f[1]) servers.push({ host: f[1].replace(/%.*$/, ''), port: 53 });
    else if ((f[0] === 'search' || f[0] === 'domain') && f.length > 1) search = f.slice(1);
  }
  return { servers, search };
}

export class Forwarder {
  private readonly servers: readonly Upstream[];
  private readonly timeoutMs: number;
  private readonly maxTtlSec: number;
  private readonly cache: LRUCache<string, Cached> | undefined;
  /** Answered from the cache / sent upstream / failed on every server (the agent's metrics). */
  cacheHits = 0;
  upstreamQueries = 0;
  upstreamFailures = 0;

  constructor(opts: ForwarderOptions) {
    this.servers = opts.servers;
    this.timeoutMs = opts.timeoutMs ?? 5000;
    this.maxTtlSec = opts.maxTtlSec ?? 60;
    const entries = opts.cacheEntries ?? 1024;
    this.cache = entries > 0 ? new LRUCache<string, Cached>({ max: entries, maxSize: entries * 1024, sizeCalculation: (v) => Math.max(1, v.bytes.length), ttlAutopurge: false }) : undefined;
  }

  get cacheSize(): number {
    return this.cache?.size ?? 0;
  }

  /**
   * The upstream answer to `query` (raw bytes, its id kept), or undefined when every server
   * failed. The transport and the client's UDP size split the cache (answers differ in size).
   */
  async forward(query: Buffer, q: Question, tcp: boolean, udpSize: number): Promise<Buffer | undefined> {
    const id = query.readUInt16BE(0);
    const key = `${tcp ? 't' : udpSize}|${q.type}|${q.class}|${q.name}`;
    const hit = this.cache?.get(key);
    if (hit) {
      this.cacheHits++;
      return agedCopy(hit.bytes, id, Math.floor((Date.now() - hit.at) / 1000));
    }
    for (const server of this.servers) {
      this.upstreamQueries++;
      try {
        const reply = tcp ? await this.exchangeTcp(server, query) : await this.exchangeUdp(server, query);
        this.remember(key, reply);
        return reply;
      } catch {
        // Try the next resolver.
      }
    }
    this.upstreamFailures++;
    return undefined;
  }

  private remember(key: string, reply: Buffer): void {
    if (!this.cache) return;
    let info;
    try { info = responseInfo(reply); } catch { return; }
    if (info.truncated) return;
    let ttl: number;
    if (info.rcode === RCODE.NXDOMAIN || (info.rcode === RCODE.NOERROR && !Number.isFinite(info.minTtl))) ttl = info.soaMinimum >= 0 ? info.soaMinimum : NEGATIVE_TTL_DEFAULT;
    else if (info.rcode === RCODE.NOERROR) ttl = info.minTtl;
    else return;
    ttl = Math.min(ttl, this.maxTtlSec);
    if (ttl <= 0) return;
    this.cache.set(key, { bytes: reply, at: Date.now() }, { ttl: ttl * 1000 });
  }

  private exchangeUdp(server: Upstream, query: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const sock = createSocket(server.host.includes(':') ? 'udp6' : 'udp4');
      const id = query.readUInt16BE(0);
      let settled = false;
      const done = (err: Error | undefined, reply?: Buffer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        sock.close();
        if (err) reject(err); else resolve(reply!);
      };
      const timer = setTimeout(() => done(new Error(`no answer from ${server.host} in ${this.timeoutMs} ms`)), this.timeoutMs);
      sock.on('error', (e) => done(e));
      sock.on('message', (msg) => {
        // A stray datagram (wrong id) is ignored; the real answer or the timeout ends it.
        if (msg.length >= 12 && msg.readUInt16BE(0) === id) done(undefined, msg);
      });
      sock.connect(server.port, server.host, () => sock.send(query));
    });
  }

  private exchangeTcp(server: Upstream, query: Buffer): Promise<Buffer> {
    return new Promise((resolve, reject) => {
      const sock = connect({ host: server.host, port: server.port });
      let buf: Buffer = Buffer.alloc(0);
      let settled = false;
      const done = (err: Error | undefined, reply?: Buffer): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        sock.destroy();
        if (err) reject(err); else resolve(reply!);
      };
      const timer = setTimeout(() => done(new Error(`no answer from ${server.host} in ${this.timeoutMs} ms`)), this.timeoutMs);
      sock.on('error', (e) => done(e));
      sock.on('close', () => done(new Error(`${server.host} closed the connection`)));
      sock.on('data', (chunk: Buffer) => {
        buf = Buffer.concat([buf, chunk]);
        if (buf.length >= 2 && buf.length >= 2 + buf.readUInt16BE(0)) done(undefined, buf.subarray(2, 2 + buf.readUInt16BE(0)));
      });
      const len = Buffer.alloc(2);
      len.writeUInt16BE(query.length);
      sock.write(Buffer.concat([len, query]));
    });
  }
}
