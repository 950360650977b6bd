// A small real Delta ADS server for tests (@grpc/grpc-js, raw Buffer serializers): it records
// each stream's gRPC metadata and decoded requests, answers every new subscription with the
// resources it holds for that type, and pushes updates to open streams.
import { Server, ServerCredentials, type ServerDuplexStream } from '@grpc/grpc-js';
import { DELTA_METHOD, decodeDeltaRequest, encodeDeltaResponse, type DeltaRequest } from '../../packages/proxy/src/xds/discovery.ts';
import { encodeResource } from '../../packages/proxy/src/xds/encode.ts';

type Json = Record<string, unknown>;

export interface AdsStream {
  /** gRPC metadata as the server received it (keys lower-cased by gRPC). */
  readonly metadata: Readonly<Record<string, string>>;
  readonly requests: DeltaRequest[];
  readonly subscribed: Set<string>;
  open: boolean;
  /** Ends the stream from the server side (the client must reconnect). */
  end(): void;
}

export interface TestAds {
  readonly port: number;
  readonly streams: AdsStream[];
  /** Replaces the resources of a type and pushes them to every stream subscribed to it. */
  set(typeUrl: string, resources: readonly Json[]): void;
  /** The same with resources already encoded (bytes encode.ts would refuse: a newer or a broken control plane). */
  setEncoded(typeUrl: string, resources: readonly EncodedResource[]): void;
  /** Polls `probe` (sync or async) until it gives a value. */
  waitFor<T>(probe: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs?: number): Promise<T>;
  close(): void;
}

export interface EncodedResource { readonly name: string; readonly resource: { readonly type_url: string; readonly value: Uint8Array } }

const identity = (b: Buffer): Buffer => b;

/** `holdUnset`: a subscription to a type nothing was set for waits for set() (istiod still computing). */
export async function startTestAds(opts: { host?: string; tls?: { cert: string; key: string }; holdUnset?: boolean } = {}): Promise<TestAds> {
  const state = new Map<string, readonly EncodedResource[]>();
  const streams: AdsStream[] = [];
  const calls = new Map<AdsStream, ServerDuplexStream<Buffer, Buffer>>();
  let nonce = 0;
  let version = 0;

  const respond = (stream: AdsStream, typeUrl: string): void => {
    const call = calls.get(stream);
    if (!call || !stream.open) return;
    if (opts.holdUnset && !state.has(typeUrl)) return;
    const resources = (state.get(typeUrl) ?? []).map((r) => ({ ...r, version: `v${version}` }));
    call.write(encodeDeltaResponse({ system_version_info: `v${version}`, type_url: typeUrl, nonce: String(++nonce), removed_resources: [], resources }));
  };

  const handler = (call: ServerDuplexStream<Buffer, Buffer>): void => {
    const md: Record<string, string> = {};
    for (const [k, v] of Object.entries(call.metadata.getMap())) md[k] = Buffer.isBuffer(v) ? v.toString('base64') : v;
    const stream: AdsStream = { metadata: md, requests: [], subscribed: new Set(), open: true, end: () => { stream.open = false; call.end(); } };
    streams.push(stream);
    calls.set(stream, call);
    call.on('data', (bytes: Buffer) => {
      const req = decodeDeltaRequest(bytes);
      stream.requests.push(req);
      if (req.response_nonce === '' && !stream.subscribed.has(req.type_url)) {
        stream.subscribed.add(req.type_url);
        respond(stream, req.type_url);
      }
    });
    const done = (): void => { stream.open = false; calls.delete(stream); };
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
  server.addService({
    DeltaAggregatedResources: {
      path: DELTA_METHOD, requestStream: true, responseStream: true,
      requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity,
    },
  }, { DeltaAggregatedResources: handler });
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
      setEncoded(typeUrl, resources.map((json) => ({ name: String(json.name), resource: encodeResource(json) })));
    },
    setEncoded,
    async waitFor(probe, what, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const v = await probe();
        if (v !== undefined && v !== false) return v;
        if (Date.now() > deadline) throw new Error(`ADS test server: timed out waiting for ${what}`);
        await new Promise((r) => setTimeout(r, 20));
      }
    },
    close() {
      for (const s of streams) s.open = false;
      server.forceShutdown();
    },
  };
}
