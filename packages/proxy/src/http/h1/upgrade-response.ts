import type { Socket } from 'node:net';
import { ChunkedDecoder, headEnd, parseHeadAt, serializeHeaders, type Head } from './parse.ts';
import { STATUS_CODES } from '../../core/node-http.ts';
import { endAndLinger } from './linger.ts';

/**
 * The upstream's answer to a forwarded HTTP/1.1 Upgrade request. Only a 101 turns the
 * connection into a tunnel; until then nothing the client sent after its request head goes
 * upstream, so a request pipelined behind an upgrade that is refused never reaches the
 * backend unrouted (upgrade smuggling). Interim 1xx heads before the answer are skipped.
 */
export interface UpgradeAnswer {
  /** 101: the raw response head (relayed as is) and the bytes after it. */
  switched(rawHead: Buffer, rest: Buffer): void;
  /** Any final status: the parsed head and the bytes after it (body start). */
  refused(head: Head, rest: Buffer): void;
  /** The upstream closed or sent something that is not an HTTP/1.1 response head. */
  failed(reason: 'connection_termination' | 'protocol_error'): void;
}

const MAX_HEAD = 80 * 1024;

export function awaitUpgradeAnswer(upstream: Socket, answer: UpgradeAnswer): () => void {
  let buf: Buffer = Buffer.alloc(0);
  let settled = false;
  const stop = (): void => {
    settled = true;
    upstream.off('data', onData);
    upstream.off('close', onClose);
    upstream.off('end', onClose);
  };
  const onData = (d: Buffer): void => {
    buf = buf.length ? Buffer.concat([buf, d]) : d;
    while (!settled) {
      const at = headEnd(buf, MAX_HEAD);
      if (at < 0) { if (buf.length >= MAX_HEAD) { stop(); answer.failed('protocol_error'); } return; }
      const head = parseHeadAt(buf, at, false, 200);
      if (typeof head === 'string') { stop(); answer.failed('protocol_error'); return; }
      const raw = buf.subarray(0, at + 4);
      buf = buf.subarray(at + 4);
      if (head.status === 101) { stop(); upstream.pause(); answer.switched(raw, buf); return; }
      if (head.status >= 200) { stop(); upstream.pause(); answer.refused(head, buf); return; }
    }
  };
  const onClose = (): void => { if (!settled) { stop(); answer.failed('connection_termination'); } };
  upstream.on('data', onData);
  upstream.once('end', onClose);
  upstream.once('close', onClose);
  return stop;
}

/** Hop-by-hop response headers that must not reach the client of a refused upgrade. */
const DROPPED = new Set(['connection', 'keep-alive', 'upgrade', 'proxy-connection']);

/**
 * Relays a refused upgrade's response to the client with `connection: close` and ends both
 * connections once its body is complete (by its own framing). Calls `done` with the bytes
 * written downstream.
 */
export function relayRefusal(upstream: Socket, downstream: Socket, head: Head, rest: Buffer, noBody: boolean, done: (bytesSent: number) => void): void {
  const headers: Record<string, string | string[] | undefined> = {};
  for (const k in head.headers) if (!DROPPED.has(k)) headers[k] = head.headers[k];
  headers.connection = 'close';
  const line = `HTTP/1.1 ${head.status} ${head.reason || STATUS_CODES[head.status] || ''}\r\n`;
  const out = Buffer.from(`${line}${serializeHeaders(headers)}\r\n`, 'latin1');
  downstream.write(out);
  let sent = out.length;
  let finished = false;
  const finish = (): void => {
    if (finished) return;
    finished = true;
    upstream.off('data', onData);
    upstream.destroy();
    endAndLinger(downstream);
    done(sent);
  };
  const chunked = !noBody && head.chunked ? new ChunkedDecoder() : undefined;
  let remaining = noBody ? 0 : chunked ? -1 : head.contentLength;
  const onData = (d: Buffer): void => {
    if (finished) return;
    let take = d.length;
    if (chunked) {
      const used = chunked.push(d, 0, () => {});
      if (used < 0) { finished = true; upstream.destroy(); downstream.destroy(); done(sent); return; }
      take = used;
    } else if (remaining >= 0) take = Math.min(remaining, d.length);
    if (take > 0) { downstream.write(take === d.length ? d : d.subarray(0, take)); sent += take; }
    if (remaining > 0) remaining -= take;
    if ((chunked && chunked.done) || remaining === 0) finish();
  };
  upstream.on('data', onData);
  // No length and not chunked: the body runs to the upstream's close.
  upstream.once('end', finish);
  upstream.once('close', finish);
  downstream.once('close', () => { if (!finished) { finished = true; upstream.destroy(); done(sent); } });
  if (remaining === 0) finish();
  else {
    if (rest.length) onData(rest);
    upstream.resume();
  }
}
