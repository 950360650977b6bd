// A small real ADS server for tests (@grpc/grpc-js, raw Buffer serializers), SotW and Delta: it
// records each stream's gRPC metadata and decoded requests, answers each new subscription with the
// resources it holds for the names asked (all of them for a wildcard), pushes updates to open
// streams, and lets a test send crafted responses (undecodable Anys, duplicates, garbage bytes,
// names nobody asked for) and read the ACK/NACK that answers each.
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import {
  DELTA_METHOD, SOTW_METHOD, decodeDeltaRequest, decodeSotwRequest, encodeDeltaResponse, encodeSotwResponse, encodeResource, resourceName,
  type AnyBytes, type DeltaRequest, type DeltaResource, type SotwRequest,
} from '../../packages/proxy/src/api/xds.ts';

type Json = Record<string, unknown>;

/** A request as the server received it; `names` is SotW's resource_names or Delta's subscriptions so far. */
export type AdsRequest = (SotwRequest | DeltaRequest) & { readonly kind: 'sotw' | 'delta' };

export interface AdsStream {
  readonly kind: 'sotw' | 'delta';
  /** gRPC metadata as the server received it (keys lower-cased by gRPC). */
  readonly metadata: Readonly<Record<string, string>>;
  readonly requests: AdsRequest[];
  /** Types the client subscribed to on this stream. */
  readonly subscribed: Set<string>;
  /** Per type: the names asked for (empty and `wildcard`: everything). */
  readonly names: Map<string, { wildcard: boolean; names: Set<string> }>;
  open: boolean;
  /** Ends the stream from the server side (the client must reconnect). */
  end(): void;
  /** Sends a crafted SotW response; returns its nonce. */
  sendSotw(r: { type_url: string; version_info?: string; resources: readonly AnyBytes[] }): string;
  /** Sends a crafted Delta response; returns its nonce. */
  sendDelta(r: { type_url: string; system_version_info?: string; resources: readonly DeltaResource[]; removed_resources?: readonly string[] }): string;
  /** Sends bytes as one gRPC message, whatever they are. */
  sendRaw(bytes: Buffer): void;
  /** The request (ACK or NACK) that answers the response with `nonce`. */
  reply(nonce: string, timeoutMs?: number): Promise<AdsRequest>;
}

export interface TestAds {
  readonly port: number;
  readonly streams: AdsStream[];
  /** Replaces the resources of a type and pushes them to every stream subscribed to it. */
  set(typeUrl: string, resources: readonly Json[]): void;
  /** The same with resources already encoded (bytes encode.ts would refuse: a newer or a broken control plane). */
  setEncoded(typeUrl: string, resources: readonly EncodedResource[]): void;
  /** Holds back answers for a type (subscriptions are recorded) until release(). */
  hold(typeUrl: string): void;
  release(typeUrl: string): void;
  /** The newest open stream (waits for one). */
  stream(): Promise<AdsStream>;
  /** Polls `probe` (sync or async) until it gives a value. */
  waitFor<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs?: number): Promise<T>;
  close(): void;
}

export interface EncodedResource { readonly name: string; readonly resource: { readonly type_url: string; readonly value: Uint8Array } }

const identity = (b: Buffer): Buffer => b;

async function poll<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs: number): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await probe();
    if (v !== undefined && v !== false) return v;
    if (Date.now() > deadline) throw new Error(`ADS test server: timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export async function startTestAds(opts: { host?: string; tls?: { cert: string; key: string } } = {}): Promise<TestAds> {
  const state = new Map<string, readonly EncodedResource[]>();
  const held = new Set<string>();
  const streams: AdsStream[] = [];
  let nonce = 0;
  let version = 0;

  const wanted = (stream: AdsStream, typeUrl: string, only?: ReadonlySet<string>): EncodedResource[] => {
    const sub = stream.names.get(typeUrl);
    return (state.get(typeUrl) ?? []).filter((r) => (only ? only.has(r.name) : !sub || sub.wildcard || sub.names.has(r.name)));
  };

  const respond = (stream: AdsStream, typeUrl: string, only?: ReadonlySet<string>): void => {
    if (!stream.open || held.has(typeUrl)) return;
    const resources = wanted(stream, typeUrl, only);
    if (stream.kind === 'sotw') stream.sendSotw({ type_url: typeUrl, version_info: `v${version}`, resources: resources.map((r) => r.resource) });
    else stream.sendDelta({ type_url: typeUrl, system_version_info: `v${version}`, resources: resources.map((r) => ({ ...r, version: `v${version}` })) });
  };

  const handler = (kind: 'sotw' | 'delta') => (call: ServerDuplexStream<Buffer, Buffer>): void => {
    const md: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.metadata.getMap())) md[k] = Buffer.isBuffer(v) ? v.toString('base64') : v;
    const write = (bytes: Buffer): void => { if (stream.open) call.write(bytes); };
    const stream: AdsStream = {
      kind, metadata: md, requests: [], subscribed: new Set(), names: new Map(), open: true,
      end: () => { stream.open = false; call.end(); },
      sendSotw(r) {
        const n = String(++nonce);
        write(encodeSotwResponse({ version_info: r.version_info ?? `v${version}`, resources: r.resources, type_url: r.type_url, nonce: n }));
        return n;
      },
      sendDelta(r) {
        const n = String(++nonce);
        write(encodeDeltaResponse({ system_version_info: r.system_version_info ?? `v${version}`, type_url: r.type_url, nonce: n, removed_resources: r.removed_resources ?? [], resources: r.resources }));
        return n;
      },
      sendRaw: write,
      reply: (n, timeoutMs = 10_000) => poll(() => stream.requests.find((q) => q.response_nonce === n), `the reply to response ${n}`, timeoutMs),
    };
    streams.push(stream);
    call.on('data', (bytes: Buffer) => {
      if (kind === 'sotw') {
        const req = decodeSotwRequest(bytes);
        stream.requests.push({ ...req, kind });
        const before = stream.names.get(req.type_url);
        const first = !stream.subscribed.has(req.type_url);
        const names = new Set(req.resource_names);
        const changed = first || !before || before.names.size !== names.size || [...names].some((x) => !before.names.has(x));
        stream.subscribed.add(req.type_url);
        stream.names.set(req.type_url, { wildcard: first ? names.size === 0 : (before?.wildcard ?? false) && names.size === 0, names });
        if (changed) respond(stream, req.type_url);
        return;
      }
      const req = decodeDeltaRequest(bytes);
      stream.requests.push({ ...req, kind });
      if (req.response_nonce !== '') return;
      const first = !stream.subscribed.has(req.type_url);
      const sub = stream.names.get(req.type_url) ?? { wildcard: first && req.resource_names_subscribe.length === 0, names: new Set<string>() };
      for (const n of req.resource_names_subscribe) sub.names.add(n);
      for (const n of req.resource_names_unsubscribe) sub.names.delete(n);
      stream.names.set(req.type_url, sub);
      stream.subscribed.add(req.type_url);
      if (first) respond(stream, req.type_url);
      else if (req.resource_names_subscribe.length > 0) respond(stream, req.type_url, new Set(req.resource_names_subscribe));
    });
    const done = (): void => { stream.open = false; };
    call.on('end', () => { done(); call.end(); });
    call.on('error', done);
    call.on('cancelled', done);
  };

  const setEncoded = (typeUrl: string, resources: readonly EncodedResource[]): void => {
    version++;
    state.set(typeUrl, resources);
    for (const s of streams) if (s.open && s.subscribed.has(typeUrl)) respond(s, typeUrl);
  };

  const server = new Server();
  const method = (path: string): Record<string, unknown> => ({
    path, requestStream: true, responseStream: true,
    requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity,
  });
  server.addService(
    { StreamAggregatedResources: method(SOTW_METHOD), DeltaAggregatedResources: method(DELTA_METHOD) } as never,
    { StreamAggregatedResources: handler('sotw'), DeltaAggregatedResources: handler('delta') },
  );
  const creds = opts.tls
    ? ServerCredentials.createSsl(null, [{ cert_chain: Buffer.from(opts.tls.cert), private_key: Buffer.from(opts.tls.key) }], false)
    : ServerCredentials.createInsecure();
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync(`${opts.host ?? '127.0.0.1'}:0`, creds, (err, p) => (err ? reject(err) : resolve(p)));
  });

  return {
    port,
    streams,
    set(typeUrl, resources) {
      setEncoded(typeUrl, resources.map((json) => ({ name: resourceName(typeUrl, json), resource: encodeResource(json) })));
    },
    setEncoded,
    hold(typeUrl) { held.add(typeUrl); },
    release(typeUrl) {
      held.delete(typeUrl);
      for (const s of streams) if (s.open && s.subscribed.has(typeUrl)) respond(s, typeUrl);
    },
    stream: () => poll(() => streams.filter((s) => s.open).at(-1), 'an open ADS stream', 15_000),
    waitFor: (probe, what, timeoutMs = 10_000) => poll(probe, what, timeoutMs),
    close() {
      for (const s of streams) s.open = false;
      server.forceShutdown();
    },
  };
}
