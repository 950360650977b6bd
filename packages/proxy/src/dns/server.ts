/**
 * istio-agent's DNS proxy (127.0.0.1:15053, UDP and TCP; also ::1 when the pod has IPv6
 * resolvers): names from the NDS table are answered here, everything else goes to the pod's
 * resolvers. Until the first table arrives every query gets SERVFAIL (istio-agent's default:
 * an app must not learn a mesh name is "unknown" just because istiod was slow).
 * Hostile input: a malformed query gets FORMERR (or is dropped when not even a header),
 * queries in flight and TCP connections are capped, idle TCP connections are closed.
 */
import { createSocket, type Socket as UdpSocket } from 'node:dgram';
import { createServer, type Server, type Socket } from 'node:net';
import { buildReply, DnsFormatError, errorReply, MIN_UDP_SIZE, parseQuery, RCODE, type Query } from './wire.ts';
import type { NameTable } from './table.ts';
import type { Forwarder } from './forward.ts';

export interface DnsProxyOptions {
  /** Addresses to listen on, each for UDP and TCP (default 127.0.0.1). */
  readonly addresses?: readonly string[];
  readonly port: number;
  readonly forwarder: Forwarder;
  readonly maxInFlight?: number;
  readonly maxTcpConnections?: number;
  readonly tcpIdleMs?: number;
  /**
   * Makes the bound sockets instead of binding here (ztunnel binds inside each pod's network
   * namespace); the proxy attaches its handlers. Both must be bound to `address:port`.
   */
  readonly bind?: (address: string, port: number) => Promise<{ tcp: Server; udp: UdpSocket }>;
}

export interface DnsCounters {
  requests: number;
  answeredLocally: number;
  forwarded: number;
  failures: number;
  malformed: number;
}

export class DnsProxy {
  private table: NameTable | undefined;
  private readonly opts: DnsProxyOptions;
  private readonly udp: UdpSocket[] = [];
  private readonly tcp: Server[] = [];
  private readonly conns = new Set<Socket>();
  private inFlight = 0;
  readonly counters: DnsCounters = { requests: 0, answeredLocally: 0, forwarded: 0, failures: 0, malformed: 0 };
  /** The ports actually bound (port 0 in tests picks one; UDP and TCP share it per address). */
  port = 0;

  constructor(opts: DnsProxyOptions) {
    this.opts = opts;
  }

  /** A new NDS table: swapped in whole, so a query sees the old table or the new one. */
  setTable(table: NameTable): void {
    this.table = table;
  }

  get ready(): boolean {
    return this.table !== undefined;
  }

  get forwarder(): Forwarder {
    return this.opts.forwarder;
  }

  async start(): Promise<void> {
    let port = this.opts.port;
    for (const address of this.opts.addresses ?? ['127.0.0.1']) {
      let tcp: Server, udp: UdpSocket;
      if (this.opts.bind) {
        ({ tcp, udp } = await this.opts.bind(address, port));
        tcp.on('connection', (s: Socket) => this.onTcp(s));
      } else {
        tcp = createServer({ pauseOnConnect: false }, (s) => this.onTcp(s));
        await new Promise<void>((resolve, reject) => { tcp.once('error', reject); tcp.listen(port, address, () => { tcp.off('error', reject); resolve(); }); });
        port = (tcp.address() as { port: number }).port;
        udp = createSocket({ type: address.includes(':') ? 'udp6' : 'udp4' });
        await new Promise<void>((resolve, reject) => { udp.once('error', reject); udp.bind(port, address, () => { udp.off('error', reject); resolve(); }); });
      }
      udp.on('message', (msg, rinfo) => { void this.onUdp(udp, msg, rinfo.address, rinfo.port); });
      udp.on('error', () => { /* a send to a vanished client: nothing to do */ });
      this.udp.push(udp);
      this.tcp.push(tcp);
    }
    this.port = port;
  }

  async close(): Promise<void> {
    for (const u of this.udp) u.close();
    for (const c of this.conns) c.destroy();
    await Promise.all(this.tcp.map((t) => new Promise((r) => t.close(r))));
  }

  /** The reply bytes for one query message (undefined: drop it). */
  async answer(msg: Buffer, tcp: boolean): Promise<Buffer | undefined> {
    this.counters.requests++;
    let q: Query;
    try {
      q = parseQuery(msg);
    } catch (e) {
      if (!(e instanceof DnsFormatError) || msg.length < 12) return undefined;
      this.counters.malformed++;
      return errorReply({ id: msg.readUInt16BE(0), flags: msg.readUInt16BE(2) & 0x7900, question: undefined, questionBytes: Buffer.alloc(0), ednsSize: 0 }, RCODE.FORMERR);
    }
    if (!q.question) { this.counters.failures++; return errorReply(q, RCODE.SERVFAIL); }
    const maxSize = tcp ? 65535 : Math.max(MIN_UDP_SIZE, q.ednsSize);
    const table = this.table;
    if (!table) { this.counters.failures++; return errorReply(q, RCODE.SERVFAIL); }
    const local = table.lookup(q.question.type, q.question.name);
    if (local.found) {
      this.counters.answeredLocally++;
      return buildReply(q, RCODE.NOERROR, local.answers, true, maxSize);
    }
    if (this.inFlight >= (this.opts.maxInFlight ?? 1000)) { this.counters.failures++; return errorReply(q, RCODE.SERVFAIL); }
    this.inFlight++;
    try {
      this.counters.forwarded++;
      const reply = await this.opts.forwarder.forward(msg, q.question, tcp, maxSize);
      if (!reply) { this.counters.failures++; return errorReply(q, RCODE.SERVFAIL); }
      return reply;
    } finally {
      this.inFlight--;
    }
  }

  private async onUdp(sock: UdpSocket, msg: Buffer, address: string, port: number): Promise<void> {
    const reply = await this.answer(msg, false);
    if (reply) sock.send(reply, port, address);
  }

  private onTcp(s: Socket): void {
    if (this.conns.size >= (this.opts.maxTcpConnections ?? 100)) { s.destroy(); return; }
    this.conns.add(s);
    s.on('close', () => this.conns.delete(s));
    s.on('error', () => s.destroy());
    s.setTimeout(this.opts.tcpIdleMs ?? 10_000, () => s.destroy());
    let buf: Buffer = Buffer.alloc(0);
    s.on('data', (chunk: Buffer) => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      while (buf.length >= 2) {
        const len = buf.readUInt16BE(0);
        if (buf.length < 2 + len) break;
        const msg = buf.subarray(2, 2 + len);
        buf = buf.subarray(2 + len);
        void this.answer(Buffer.from(msg), true).then((reply) => {
          if (!reply) { s.destroy(); return; }
          if (s.destroyed) return;
          const head = Buffer.alloc(2);
          head.writeUInt16BE(reply.length);
          s.write(Buffer.concat([head, reply]));
        });
      }
    });
  }
}
