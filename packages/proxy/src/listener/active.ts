import { createServer, type Server, type Socket } from 'node:net';
import { TLSSocket, type PeerCertificate } from 'node:tls';
import type { ListenerConfig, FilterChainConfig } from './config.ts';
import type { ConnectionFacts } from './filter-chain-match.ts';
import { parseClientHello } from './client-hello.ts';
import { peek, sniffHttp } from './peek.ts';
import { setConnInfo, nextConnectionId, type ConnInfo } from './conn-info.ts';
import type { ClusterManager } from '../upstream/manager.ts';
import type { StatsStore, Counter, Gauge } from '../stats/store.ts';
import { chainError, SslStats, verifyPeer } from '../tls/ssl-stats.ts';
import { originalDestination, available as sockoptAvailable } from '../sys/sockopt.ts';
import { logger } from '../core/log.ts';
import type { LiveNetworkFilter } from './network-filter.ts';
import type { LiveTerminal } from './terminal.ts';
import { registerInternalListener, unregisterInternalListener, type InternalAccept, type InternalConnectMeta } from './internal.ts';
import type { InternalSocket } from './internal-socket.ts';
import { restoreInternalAddresses, type RestoredAddresses } from './internal-dst.ts';
import { DrainManager } from '../core/drain.ts';
import { admitDownstream, overloadState, releaseDownstream } from '../core/overload.ts';
import { canonicalIp } from '../core/canonical-ip.ts';

const log = logger('connection');

/** One filter chain made live: its read filters and terminal, shared by the chain's connections. */
interface LiveChain {
  readonly filters: readonly LiveNetworkFilter[];
  readonly terminal: LiveTerminal;
}

class ListenerStats {
  readonly cxTotal: Counter;
  readonly cxActive: Gauge;
  readonly noChain: Counter;
  /** ssl.* and server_ssl_socket_factory.*, for listeners with a TLS chain. */
  readonly ssl: SslStats | undefined;
  readonly timeouts: Counter;
  /** Refused past the global connection cap (overload.global_downstream_max_connections). */
  readonly globalCxOverflow: Counter;
  /** Refused by the overload action stop_accepting_connections. */
  readonly overloadReject: Counter;
  constructor(store: StatsStore, prefix: string, tls: boolean) {
    const p = store.scope('listener', 'envoy_listener_address', prefix);
    this.cxTotal = p.counter('downstream_cx_total');
    this.cxActive = p.gauge('downstream_cx_active');
    this.noChain = p.counter('no_filter_chain_match');
    this.ssl = tls ? new SslStats(p, 'server') : undefined;
    this.timeouts = p.counter('downstream_pre_cx_timeout');
    this.globalCxOverflow = p.counter('downstream_global_cx_overflow');
    this.overloadReject = p.counter('downstream_cx_overload_reject');
  }
}

/**
 * One listener made live: accepts, runs listener filters (tls/http inspector,
 * original_dst), picks the filter chain, terminates TLS and hands the connection
 * to the chain's terminal filter.
 */
export class ActiveListener {
  /** Replaced by update(): new connections use the new config, existing ones keep theirs. */
  config: ListenerConfig;
  private readonly live = new Map<FilterChainConfig, LiveChain>();
  /** Drives this listener's HTTP connections away while draining (shared by all its chains). */
  readonly drainManager = new DrainManager();
  private readonly stats: ListenerStats;
  private server: Server | undefined;
  /** Finds the listener for an original destination (use_original_dst hand-off). */
  private readonly redirect: ((address: string, port: number) => ActiveListener | undefined) | undefined;

  /**
   * `clusters` may be undefined for a listener whose filters and terminals reach no cluster (ztunnel's
   * pods): such a program then never loads the upstream stack; one that asks for it anyway throws.
   */
  constructor(config: ListenerConfig, clusters: ClusterManager | undefined, store: StatsStore, redirect?: (address: string, port: number) => ActiveListener | undefined) {
    this.config = config;
    this.stats = new ListenerStats(store, config.statPrefix, config.tls);
    this.redirect = redirect;
    this.clusters = clusters;
    this.store = store;
  }

  private readonly clusters: ClusterManager | undefined;
  private readonly store: StatsStore;

  private liveChain(chain: FilterChainConfig): LiveChain {
    let c = this.live.get(chain);
    if (!c) {
      const { clusters, config } = this;
      const scope = {
        store: this.store, direction: config.direction, drainManager: this.drainManager,
        get clusters(): ClusterManager {
          if (!clusters) throw new Error(`listener ${config.name}: chain ${chain.name} needs clusters, and this listener has no cluster manager`);
          return clusters;
        },
      };
      c = { filters: chain.readFilters.map((f) => f.live(scope)), terminal: chain.terminal.live(scope) };
      this.live.set(chain, c);
    }
    return c;
  }

  /** Set while an internal listener is registered (so close() removes exactly this registration). */
  private internalAccept: InternalAccept | undefined;

  listen(reusePort: boolean): Promise<void> {
    if (this.config.internal) {
      // No socket: the listener is reachable by name from envoy_internal_address endpoints.
      this.internalAccept = (socket, meta) => this.acceptInternal(socket, meta);
      registerInternalListener(this.config.name, this.internalAccept);
      return Promise.resolve();
    }
    const server = createServer({ allowHalfOpen: true, noDelay: true, pauseOnConnect: true }, (s) => this.accept(s));
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: this.config.address.address, port: this.config.address.port, reusePort, backlog: 1024 }, () => {
        server.removeListener('error', reject);
        server.on('error', (err) => log.error(`listener ${this.config.name}: ${err.message}`));
        resolve();
      });
    });
  }

  /**
   * Accepts on a server the program bound itself — e.g. inside another network namespace, where
   * listen() cannot reach (ztunnel's in-pod listeners) — instead of binding config.address. The
   * listener owns it from here: stopAccepting/drain/close close it. Make it with pauseOnConnect
   * (and allowHalfOpen), as listen() does, so listener filters can peek and terminals start reading.
   */
  listenOn(server: Server): void {
    if (this.server) throw new Error(`listener ${this.config.name} is already listening`);
    this.server = server;
    server.on('connection', (s: Socket) => this.accept(s));
    server.on('error', (err) => log.error(`listener ${this.config.name}: ${err.message}`));
  }

  /** The port actually bound (useful when the config asked for port 0). */
  get boundPort(): number {
    const a = this.server?.address();
    return a && typeof a === 'object' ? a.port : this.config.address.port;
  }

  accept(socket: Socket): void {
    const stats = this.stats;
    // The overload manager's checks come first: a refused connection costs nothing more.
    if (!admitDownstream()) { stats.globalCxOverflow.inc(); socket.destroy(); return; }
    if (overloadState.stopAcceptingConnections) { releaseDownstream(); stats.overloadReject.inc(); socket.destroy(); return; }
    overloadState.accepted++;
    socket.once('close', connectionClosed);
    stats.cxTotal.inc();
    stats.cxActive.inc();
    socket.once('close', () => stats.cxActive.dec());
    socket.on('error', () => { /* reported by the filter that owns the socket */ });
    const dst = this.config.originalDst && sockoptAvailable ? originalDestination(socket) : { address: socket.localAddress ?? '', port: socket.localPort ?? 0 };
    if (this.config.useOriginalDst && this.redirect && (dst.port !== socket.localPort || dst.address !== socket.localAddress)) {
      const target = this.redirect(dst.address, dst.port);
      if (target && target !== this) {
        stats.cxActive.dec();
        socket.removeAllListeners('close');
        socket.once('close', connectionClosed);
        target.handOff(socket, dst);
        return;
      }
    }
    this.inspect(socket, dst);
  }

  /** A connection from an internal upstream: listener filters read what the upstream side passed along. */
  acceptInternal(socket: InternalSocket, meta: InternalConnectMeta): void {
    const stats = this.stats;
    stats.cxTotal.inc();
    stats.cxActive.inc();
    const s = socket as unknown as Socket;
    s.once('close', () => stats.cxActive.dec());
    s.on('error', () => { /* reported by the filter that owns the socket */ });
    const restored = restoreInternalAddresses(this.config, socket, meta);
    this.inspect(s, restored.local, restored);
  }

  /** A connection handed over by a use_original_dst listener (Envoy's virtualOutbound → per-port listener). */
  handOff(socket: Socket, dst: { address: string; port: number }): void {
    this.stats.cxTotal.inc();
    this.stats.cxActive.inc();
    socket.once('close', () => this.stats.cxActive.dec());
    this.inspect(socket, dst);
  }

  private inspect(socket: Socket, dst: { address: string; port: number }, internal?: RestoredAddresses): void {
    const source = internal ? internal.remote : { address: canonicalIp(socket.remoteAddress ?? ''), port: socket.remotePort ?? 0 };
    const facts: ConnectionFacts = {
      destinationIp: canonicalIp(dst.address), destinationPort: dst.port,
      directSourceIp: source.address, sourceIp: source.address, sourcePort: source.port,
      serverName: '', transportProtocol: '', applicationProtocols: [],
    };
    const port = dst.port;
    const tlsInspector = this.config.tlsInspector !== undefined && !this.config.tlsInspector(port);
    const httpInspector = this.config.httpInspector !== undefined && !this.config.httpInspector(port);
    if (!tlsInspector && !httpInspector) return this.dispatch(socket, facts, dst, internal);
    peek(socket, (bytes) => {
      const hello = tlsInspector ? parseClientHello(bytes) : undefined;
      if (hello && hello.state === 'need-more') return false;
      if (hello && hello.state === 'tls') return true;
      return !httpInspector || sniffHttp(bytes) !== '' || bytes.indexOf('\r\n') >= 0;
    }, this.config.listenerFiltersTimeoutMs, (bytes, timedOut) => {
      if (timedOut && !this.config.continueOnListenerFiltersTimeout) { this.stats.timeouts.inc(); socket.destroy(); return; }
      const hello = tlsInspector ? parseClientHello(bytes) : undefined;
      if (hello?.state === 'tls') {
        facts.transportProtocol = 'tls';
        facts.serverName = hello.serverName;
        facts.applicationProtocols = hello.alpn;
      } else {
        if (tlsInspector) facts.transportProtocol = 'raw_buffer';
        if (httpInspector && bytes.length) {
          const h = sniffHttp(bytes);
          if (h === 'h2c') facts.applicationProtocols = ['h2c'];
          else if (/^[A-Z]+ \S+ HTTP\/1\.[01]\r\n/.test(bytes.toString('latin1', 0, Math.min(bytes.length, 4096)).split('\n')[0] + '\n')) facts.applicationProtocols = ['http/1.1'];
        }
      }
      this.dispatch(socket, facts, dst, internal);
    });
  }

  private dispatch(socket: Socket, facts: ConnectionFacts, dst: { address: string; port: number }, internal: RestoredAddresses | undefined): void {
    const chain = this.config.chains.select(facts);
    if (!chain) {
      this.stats.noChain.inc();
      log.debug(`listener ${this.config.name}: no filter chain matches ${facts.sourceIp} → ${facts.destinationIp}:${facts.destinationPort}`);
      socket.destroy();
      return;
    }
    const live = this.liveChain(chain);
    const base = {
      id: nextConnectionId(),
      remoteAddress: internal ? internal.remote.address : canonicalIp(socket.remoteAddress ?? ''),
      remotePort: internal ? internal.remote.port : socket.remotePort ?? 0,
      localAddress: internal ? internal.local.address : canonicalIp(socket.localAddress ?? ''),
      localPort: internal ? internal.local.port : socket.localPort ?? 0,
      originalDst: { address: canonicalIp(dst.address), port: dst.port },
      startTime: Date.now(),
      dynamicMetadata: internal?.dynamicMetadata,
    };
    if (!chain.tls) {
      const info: ConnInfo = { ...base, tls: false, serverName: facts.serverName, alpn: '', peerUriSans: NO_SANS, filterState: internal?.filterState };
      setConnInfo(socket, info);
      // The terminal filter starts reading (a sniffed socket must not be resumed before its codec owns it).
      runChain(live, socket, info);
      return;
    }
    const tls = chain.tls;
    const ssl = this.stats.ssl;
    const state = tls.current();
    if (!state) {
      // Envoy's NotReadySslSocket: the chain's SDS secrets have not arrived.
      ssl?.secretsNotReady.inc();
      log.debug(`listener ${this.config.name}: TLS secrets not ready (${tls.missing().join(', ')}); connection refused`);
      socket.destroy();
      return;
    }
    const secure = new TLSSocket(socket, {
      isServer: true,
      secureContext: state.context,
      ALPNProtocols: serverAlpn(tls.alpn, facts),
      requestCert: tls.requireClientCertificate || state.verifyPeer,
      // Verified after the handshake, so each failure is counted by its cause (verifyPeer).
      rejectUnauthorized: false,
    });
    let handshook = false;
    secure.on('error', () => { if (!handshook) ssl?.connectionError.inc(); socket.destroy(); });
    secure.once('secure', () => {
      handshook = true;
      const verdict = verifyPeer(secure, state, tls.requireClientCertificate, ssl);
      if (verdict !== 'ok') {
        log.debug(`listener ${this.config.name}: peer refused (${verdict}${verdict === 'chain' ? `: ${chainError(secure)}` : ''})`);
        secure.destroy();
        return;
      }
      // Only a chain verified against trusted_ca names the peer (SANs, XFCC).
      const peer = secure.getPeerCertificate();
      const verified = state.verifyPeer && peer !== undefined && peer.raw !== undefined;
      const info: ConnInfo = {
        ...base, tls: true, serverName: (secure as TLSSocket & { servername?: string }).servername || facts.serverName,
        alpn: secure.alpnProtocol || '', peerUriSans: verified ? uriSans(peer) : NO_SANS, filterState: internal?.filterState,
        localUriSans: localSans(state, secure),
        peerCertificate: verified ? peer : undefined,
      };
      setConnInfo(secure, info);
      runChain(live, secure as unknown as Socket, info);
    });
    // No socket.resume(): the TLS layer reads the handle itself (and first drains bytes a listener filter peeked).
  }

  /**
   * A new config for the same address (an LDS update): the socket stays open, new connections use the
   * new filter chains, and connections on the old chains drain (HTTP: GOAWAY / connection: close).
   */
  update(config: ListenerConfig): void {
    const old = [...this.live.values()];
    this.config = config;
    this.live.clear();
    for (const c of old) c.terminal.drain?.();
  }

  private unregister(): void {
    if (this.internalAccept) unregisterInternalListener(this.config.name, this.internalAccept);
    this.internalAccept = undefined;
  }

  /** Stop accepting; existing connections drain (HTTP: GOAWAY / connection: close). */
  drain(): void {
    this.stopAccepting();
    for (const c of this.live.values()) c.terminal.drain?.();
  }

  /** Close the listening socket (connection attempts are refused); open connections carry on. */
  stopAccepting(): void {
    this.unregister();
    this.server?.close();
  }

  /** While draining: ask idle HTTP/1 connections and HTTP/2 sessions to go away, as the drain manager decides. */
  drainTick(): void {
    if (!this.drainManager.draining) return;
    for (const c of this.live.values()) c.terminal.drainTick?.();
  }

  close(): void {
    this.unregister();
    this.server?.close();
    for (const c of this.live.values()) c.terminal.close?.();
  }
}

const NO_SANS: readonly string[] = [];

/** One downstream socket closed (module-level: no closure per connection). */
function connectionClosed(): void {
  releaseDownstream();
}

/**
 * The server's ALPN list for one connection. When the tls_inspector saw the client's
 * list and nothing overlaps, offer none: BoringSSL (Envoy) then goes on without ALPN,
 * where Node would end the handshake with no_application_protocol.
 */
function serverAlpn(alpn: readonly string[], facts: ConnectionFacts): string[] | undefined {
  if (alpn.length === 0) return undefined;
  const offered = facts.transportProtocol === 'tls' ? facts.applicationProtocols : undefined;
  if (offered && offered.length && !offered.some((p) => alpn.includes(p))) return undefined;
  return alpn as string[];
}

/**
 * Read filters in order, then the terminal; a filter that answers 'close' ends the connection,
 * one that answers 'stop' resumes the chain from the next filter when it is ready.
 */
function runChain(live: LiveChain, socket: Socket, info: ConnInfo, from = 0): void {
  const filters = live.filters;
  for (let i = from; i < filters.length; i++) {
    const r = filters[i].onConnection(socket, info, () => { if (!socket.destroyed) runChain(live, socket, info, i + 1); });
    if (r === 'close') {
      socket.destroy();
      // The connection still gets its access-log record, with the filter's termination details (an RBAC deny).
      live.terminal.rejected?.(info);
      return;
    }
    if (r === 'stop') return;
  }
  live.terminal.onConnection(socket, info);
}

/** The URI SANs (SPIFFE ids) of the peer certificate. */
function uriSans(peer: PeerCertificate): readonly string[] {
  return parseUriSans(peer.subjectaltname);
}

/** Our own certificate's URI SANs: the same for every connection of a chain's TLS context, so parsed once. */
const ownSans = new WeakMap<object, readonly string[]>();
function localSans(tls: object, secure: TLSSocket): readonly string[] {
  let sans = ownSans.get(tls);
  if (!sans) {
    const cert = secure.getCertificate();
    sans = parseUriSans(cert && 'subjectaltname' in cert ? cert.subjectaltname : undefined);
    ownSans.set(tls, sans);
  }
  return sans;
}

function parseUriSans(alt: string | undefined): readonly string[] {
  if (!alt) return NO_SANS;
  const out: string[] = [];
  for (const part of alt.split(', ')) if (part.startsWith('URI:')) out.push(part.slice(4));
  return out;
}

