/**
 * The aggregated xDS stream (ADS) over @grpc/grpc-js: one bidirectional stream carrying
 * every type, State-of-the-World or Delta. On a broken stream it reconnects with
 * jittered exponential back-off; the config layer keeps serving the last good config.
 * Responses are handled one at a time, in order: applying one may wait for listeners to bind,
 * and its ACK/NACK goes out only then.
 */
import { Client, Metadata, type ChannelCredentials, type ClientDuplexStream } from '@grpc/grpc-js';
import { DELTA_METHOD, SOTW_METHOD, TYPE_URL } from './discovery.ts';
import { DeltaProtocol, MalformedResponse, SotwProtocol, type AdsProtocol, type ProtocolEvents, type TypeState } from './ads-protocol.ts';
import type { XdsHandler } from './types.ts';
import { encodeInParts, type OutgoingRequest } from './request-parts.ts';
import type { StatsStore } from '../stats/store.ts';
import { logger } from '../core/log.ts';

const log = logger('config');

type Json = Record<string, unknown>;

export interface AdsClientOptions {
  /** A gRPC target: `host:port`, `ipv4:1.2.3.4:15010`, `unix:/path`. */
  readonly target: string;
  readonly credentials: ChannelCredentials;
  /** gRPC metadata per stream (read again on every reconnect: tokens rotate). */
  readonly headers: () => Record<string, string>;
  /** Server name to verify / send as :authority when it differs from the target. */
  readonly authority?: string;
  readonly node: Json;
  readonly delta: boolean;
  readonly backoffBaseMs?: number;
  readonly backoffMaxMs?: number;
}

/** Responses read ahead of the one being applied before the stream stops reading. */
const MAX_QUEUED_RESPONSES = 8;

/** Envoy's stat prefixes for each subscription. */
const STAT_PREFIX: Record<string, string> = {
  [TYPE_URL.cluster]: 'cluster_manager.cds', [TYPE_URL.listener]: 'listener_manager.lds',
  [TYPE_URL.route]: 'xds.rds', [TYPE_URL.endpoint]: 'xds.eds', [TYPE_URL.secret]: 'xds.sds', [TYPE_URL.extension]: 'xds.ecds',
};

export class AdsClient {
  private readonly opts: AdsClientOptions;
  private readonly handler: XdsHandler;
  private readonly store: StatsStore;
  private readonly states = new Map<string, TypeState>();
  private client: Client | undefined;
  private call: ClientDuplexStream<Buffer, Buffer> | undefined;
  private protocol: AdsProtocol | undefined;
  private retryTimer: NodeJS.Timeout | undefined;
  /** The tail of the work queue: stream opens, responses and resubscriptions run in order. */
  private work: Promise<void> = Promise.resolve();
  private failures = 0;
  private stopped = false;
  /** Set when the control plane's last message on this stream was a response (healthy stream). */
  connected = false;
  /** The last NACK message per type (admin / tests). */
  readonly lastError = new Map<string, string>();

  constructor(opts: AdsClientOptions, handler: XdsHandler, store: StatsStore) {
    this.opts = opts;
    this.handler = handler;
    this.store = store;
  }

  start(): void {
    const options: Record<string, string | number> = { 'grpc.max_receive_message_length': -1, 'grpc.keepalive_time_ms': 30_000 };
    if (this.opts.authority) { options['grpc.default_authority'] = this.opts.authority; options['grpc.ssl_target_name_override'] = this.opts.authority; }
    this.client = new Client(this.opts.target, this.opts.credentials, options);
    this.connect();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.retryTimer);
    this.call?.cancel();
    this.client?.close();
  }

  /** The config layer's interest changed (new EDS clusters, new RDS names): tell the server. */
  resubscribe(): void {
    this.enqueue(async () => {
      if (!this.call || !this.protocol) return;
      const call = this.call;
      const requests = await this.protocol.resubscribe();
      await this.send(call, requests);
    });
  }

  private enqueue(task: () => void | Promise<void>): void {
    this.work = this.work.then(task).catch((e: Error) => log.error(`xDS: ${e.message}`));
  }

  private connect(): void {
    if (this.stopped || !this.client) return;
    const md = new Metadata();
    for (const [k, v] of Object.entries(this.opts.headers())) md.set(k, v);
    const identity = (b: Buffer): Buffer => b;
    const call = this.client.makeBidiStreamRequest(this.opts.delta ? DELTA_METHOD : SOTW_METHOD, identity, identity, md);
    this.call = call;
    const events: ProtocolEvents = {
      accepted: (typeUrl, version) => {
        const p = STAT_PREFIX[typeUrl] ?? 'xds';
        this.store.counter(`${p}.update_success`).inc();
        this.store.counter(`${p}.update_attempt`).inc();
        this.store.gauge(`${p}.version`).set(versionHash(version));
        this.lastError.delete(typeUrl);
      },
      rejected: (typeUrl, _version, message) => {
        const p = STAT_PREFIX[typeUrl] ?? 'xds';
        this.store.counter(`${p}.update_rejected`).inc();
        this.store.counter(`${p}.update_attempt`).inc();
        this.lastError.set(typeUrl, message);
        log.warn(`xDS: rejected ${typeUrl.slice(typeUrl.lastIndexOf('.') + 1)} update: ${message}`);
      },
    };
    // Built in the queue: a new stream resets per-stream state, which a response still being
    // applied on the old stream must not see half-way.
    let protocol: AdsProtocol | undefined;
    this.enqueue(async () => {
      if (this.call !== call) return;
      protocol = this.opts.delta
        ? new DeltaProtocol(this.handler, this.states, this.opts.node, events)
        : new SotwProtocol(this.handler, this.states, this.opts.node, events);
      this.protocol = protocol;
      await this.send(call, await protocol.open());
    });
    // Responses wait their turn here; past a few, stop reading (HTTP/2 flow control holds the rest
    // at the server), so a server flooding responses cannot grow this queue without bound.
    let queued = 0;
    call.on('data', (bytes: Buffer) => {
      if (this.call !== call) return;
      this.setConnected(true);
      if (++queued >= MAX_QUEUED_RESPONSES) call.pause();
      this.enqueue(async () => {
        try {
          await this.handle(call, protocol, bytes);
        } finally {
          if (--queued === 0) call.resume();
        }
      });
    });
    call.on('error', (e: Error) => this.broken(call, e.message));
    call.on('end', () => this.broken(call, 'stream ended'));
  }

  private async handle(call: ClientDuplexStream<Buffer, Buffer>, protocol: AdsProtocol | undefined, bytes: Buffer): Promise<void> {
    if (this.call !== call || !protocol) return;
    let out: OutgoingRequest[];
    try {
      out = await protocol.onResponse(bytes);
      this.failures = 0;
    } catch (e) {
      if (!(e instanceof MalformedResponse)) throw e;
      // Envoy's gRPC client resets a stream whose message does not parse; the next one starts afresh.
      this.broken(call, e.message);
      call.cancel();
      return;
    }
    await this.send(call, out);
  }

  /** Encodes (in time slices: a subscription may name 20,000 resources) and writes, in order, while the stream is current. */
  private async send(call: ClientDuplexStream<Buffer, Buffer>, requests: readonly OutgoingRequest[]): Promise<void> {
    for (const r of requests) {
      const bytes = await encodeInParts(r);
      if (this.call !== call) return;
      call.write(bytes);
    }
  }

  private broken(call: ClientDuplexStream<Buffer, Buffer>, why: string): void {
    if (this.call !== call) return;
    this.call = undefined;
    this.protocol = undefined;
    this.setConnected(false);
    if (this.stopped) return;
    this.failures++;
    // Envoy's back-off: exponential from 500 ms to 30 s, fully jittered.
    const base = this.opts.backoffBaseMs ?? 500;
    const cap = Math.min(this.opts.backoffMaxMs ?? 30_000, base * 2 ** Math.min(this.failures - 1, 16));
    const delay = Math.max(base / 2, Math.random() * cap);
    log.warn(`xDS: stream to ${this.opts.target} closed (${why}); retrying in ${Math.round(delay)} ms`);
    this.retryTimer = setTimeout(() => this.connect(), delay);
    this.retryTimer.unref();
  }

  private setConnected(up: boolean): void {
    this.connected = up;
    this.store.gauge('control_plane.connected_state').set(up ? 1 : 0);
  }
}

/** Envoy publishes a hash of the version string as the `version` gauge. */
function versionHash(version: string): number {
  let h = 0;
  for (let i = 0; i < version.length; i++) h = (h * 31 + version.charCodeAt(i)) >>> 0;
  return h;
}
