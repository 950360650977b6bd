import type { Exchange, Headers } from './exchange.ts';
import type { RequestRecord } from './request-record.ts';

/**
 * A response body transformation an encoder filter installs from encodeHeaders (the compressor):
 * the router then hands it the body instead of writing it downstream itself. Unset on almost every
 * request, so the router's cost is one field test per chunk.
 */
export interface BodyEncoder {
  /** The response headers went out: encoded bytes go to `ex` (counted in rec.bytesSent); `resume` restarts a paused upstream. */
  start(ex: Exchange, rec: RequestRecord, resume: () => void): void;
  /** False while the downstream or the encoder is full: the upstream pauses until `resume`. */
  write(chunk: Buffer): boolean;
  /** The upstream body ended: flush, end the downstream with `trailers`, then `done`. */
  end(trailers: Headers | undefined, done: () => void): void;
  /** The downstream drained after a write that filled it. */
  drained(): void;
  /** A local reply's whole body, encoded at once. */
  encodeAll(body: Buffer): Buffer;
}
