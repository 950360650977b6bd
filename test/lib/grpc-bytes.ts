// A gRPC service over raw bytes (identity serializers, no .proto) for end-to-end integrity tests:
// every message is a deterministic pattern, so a client can check every byte it receives.
import { createHash } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';

/** Message `index` of `size` bytes: byte i = (i * 31 + index * 7 + 11) & 0xff. */
export function patternMessage(index: number, size: number): Buffer {
  const b = Buffer.allocUnsafe(size);
  const k = index * 7 + 11;
  for (let i = 0; i < size; i++) b[i] = (i * 31 + k) & 0xff;
  return b;
}

/** What a call asks for: `count` messages of `size` bytes, optionally `gapMs` apart; or a status to fail with. */
export interface Ask { readonly size: number; readonly count?: number; readonly gapMs?: number; readonly failCode?: number; readonly failMessage?: string }

const ident = (b: Buffer): Buffer => b;
function method(name: string, requestStream: boolean, responseStream: boolean): grpc.MethodDefinition<Buffer, Buffer> {
  return { path: `/skua.test.Bytes/${name}`, requestStream, responseStream, requestSerialize: ident, requestDeserialize: ident, responseSerialize: ident, responseDeserialize: ident };
}

export const BytesService = {
  Unary: method('Unary', false, false),
  ServerStream: method('ServerStream', false, true),
  /** Replies with one message: the SHA-256 (hex) and byte count of everything received. */
  ClientStream: method('ClientStream', true, false),
  /** Echoes every message back. */
  Bidi: method('Bidi', true, true),
} as const;

export const MAX_MESSAGE = 64 << 20;
export const CHANNEL_OPTIONS: grpc.ChannelOptions = { 'grpc.max_receive_message_length': MAX_MESSAGE, 'grpc.max_send_message_length': MAX_MESSAGE };

export function encodeAsk(a: Ask): Buffer { return Buffer.from(JSON.stringify(a)); }
function decodeAsk(b: Buffer): Ask { return JSON.parse(b.toString()) as Ask; }

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export interface BytesServer { readonly port: number; readonly calls: string[]; close(): Promise<void> }

/** Starts the service on a loopback port (plaintext HTTP/2). */
export async function startBytesServer(): Promise<BytesServer> {
  const server = new grpc.Server(CHANNEL_OPTIONS);
  const calls: string[] = [];
  server.addService(BytesService, {
    Unary(call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) {
      calls.push('Unary');
      const a = decodeAsk(call.request);
      if (a.failCode !== undefined) { cb({ code: a.failCode, details: a.failMessage ?? '' }); return; }
      cb(null, patternMessage(0, a.size));
    },
    async ServerStream(call: grpc.ServerWritableStream<Buffer, Buffer>) {
      calls.push('ServerStream');
      const a = decodeAsk(call.request);
      for (let i = 0; i < (a.count ?? 1); i++) {
        if (call.cancelled) return;
        if (!call.write(patternMessage(i, a.size))) await new Promise((r) => call.once('drain', r));
        if (a.gapMs) await sleep(a.gapMs);
      }
      call.end();
    },
    ClientStream(call: grpc.ServerReadableStream<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) {
      calls.push('ClientStream');
      const h = createHash('sha256');
      let n = 0;
      call.on('data', (m: Buffer) => { h.update(m); n += m.length; });
      call.on('end', () => cb(null, Buffer.from(JSON.stringify({ sha256: h.digest('hex'), bytes: n }))));
    },
    Bidi(call: grpc.ServerDuplexStream<Buffer, Buffer>) {
      calls.push('Bidi');
      call.on('data', (m: Buffer) => call.write(m));
      call.on('end', () => call.end());
    },
  });
  const port = await new Promise<number>((resolve, reject) => {
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p)));
  });
  return {
    port, calls,
    close: () => new Promise<void>((r) => { server.tryShutdown(() => r()); setTimeout(() => { server.forceShutdown(); r(); }, 2000).unref(); }),
  };
}

export function bytesClient(port: number): grpc.Client {
  const Ctor = grpc.makeGenericClientConstructor(BytesService, 'Bytes');
  return new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), CHANNEL_OPTIONS);
}

export interface CallResult { readonly messages: Buffer[]; readonly code: number; readonly details: string }

export function unary(c: grpc.Client, ask: Ask): Promise<CallResult> {
  return new Promise((resolve) => {
    c.makeUnaryRequest(BytesService.Unary.path, ident, ident, encodeAsk(ask), (err, res) => {
      resolve({ messages: res ? [res] : [], code: err?.code ?? 0, details: err?.details ?? '' });
    });
  });
}

/** A server stream read by a reader that pauses `pauseMs` after every `every` messages (a slow reader). */
export function serverStream(c: grpc.Client, ask: Ask, slow?: { every: number; pauseMs: number }): Promise<CallResult> {
  return new Promise((resolve) => {
    const call = c.makeServerStreamRequest(BytesService.ServerStream.path, ident, ident, encodeAsk(ask));
    const messages: Buffer[] = [];
    call.on('data', (m: Buffer) => {
      messages.push(m);
      if (slow && messages.length % slow.every === 0) { call.pause(); setTimeout(() => call.resume(), slow.pauseMs); }
    });
    settleStream(call, messages, resolve);
  });
}

/**
 * Resolves once the status is in and the reader has seen the end (or an error): grpc-js can
 * report the status while a paused reader still has messages to take.
 */
function settleStream(call: grpc.ClientReadableStream<Buffer> | grpc.ClientDuplexStream<Buffer, Buffer>, messages: Buffer[], resolve: (r: CallResult) => void): void {
  let code = 0, details = '', status = false, ended = false;
  const maybeDone = (): void => { if (status && ended) resolve({ messages, code, details }); };
  call.on('error', (e: grpc.ServiceError) => { code = e.code; details = e.details; ended = true; maybeDone(); });
  call.on('end', () => { ended = true; maybeDone(); });
  call.on('status', (s: grpc.StatusObject) => { if (s.code !== 0) { code = s.code; details = s.details; } status = true; maybeDone(); });
}

export function clientStream(c: grpc.Client, messages: readonly Buffer[]): Promise<CallResult> {
  return new Promise((resolve) => {
    const call = c.makeClientStreamRequest(BytesService.ClientStream.path, ident, ident, (err, res) => {
      resolve({ messages: res ? [res] : [], code: err?.code ?? 0, details: err?.details ?? '' });
    });
    (async () => {
      for (const m of messages) if (!call.write(m)) await new Promise((r) => call.once('drain', r));
      call.end();
    })();
  });
}

export function bidi(c: grpc.Client, messages: readonly Buffer[]): Promise<CallResult> {
  return new Promise((resolve) => {
    const call = c.makeBidiStreamRequest(BytesService.Bidi.path, ident, ident);
    const got: Buffer[] = [];
    call.on('data', (m: Buffer) => got.push(m));
    settleStream(call, got, resolve);
    (async () => {
      for (const m of messages) if (!call.write(m)) await new Promise((r) => call.once('drain', r));
      call.end();
    })();
  });
}

/** The index of the first message that is not pattern message `i` of `size` bytes, or -1. */
export function firstBadMessage(messages: readonly Buffer[], size: number, indexOf: (i: number) => number = (i) => i): number {
  for (let i = 0; i < messages.length; i++) if (!messages[i].equals(patternMessage(indexOf(i), size))) return i;
  return -1;
}
