import { Readable } from 'node:stream';

/** What a filter read of the request body before deciding. */
export interface BodyPrefix {
  readonly chunks: readonly Buffer[];
  readonly size: number;
  /** The whole body is in (the source ended). */
  readonly ended: boolean;
  /** More than `limit` bytes arrived while partial bodies were not allowed (Envoy answers 413). */
  readonly overflow: boolean;
}

/**
 * Envoy's decoder buffering for a filter that needs the body first (ext_authz with_request_body):
 * reads `source` until it ends or, with `partial`, until `limit` bytes are in; without `partial`
 * more than `limit` bytes is an overflow. `done` runs once, with the source paused; `failed` runs
 * if the source errors or closes first. Nothing is lost: {@link followBody} replays the prefix.
 */
export function readBodyPrefix(source: Readable, limit: number, partial: boolean, done: (p: BodyPrefix) => void, failed: () => void): void {
  const chunks: Buffer[] = [];
  let size = 0;
  let over = false;
  const finish = (ended: boolean, overflow: boolean): void => {
    if (over) return;
    over = true;
    source.off('data', onData);
    source.off('end', onEnd);
    source.off('error', onError);
    source.off('close', onClose);
    if (!ended) source.pause();
    done({ chunks, size, ended, overflow });
  };
  const onData = (chunk: Buffer): void => {
    chunks.push(chunk);
    size += chunk.length;
    if (partial ? size >= limit : size > limit) finish(false, !partial);
  };
  const onEnd = (): void => finish(true, false);
  const onError = (): void => { if (!over) { over = true; failed(); } };
  const onClose = (): void => { if (!over && !source.readableEnded) { over = true; failed(); } };
  source.on('data', onData);
  source.once('end', onEnd);
  source.once('error', onError);
  source.once('close', onClose);
}

/** The body as the router should read it: the buffered prefix, then the rest of `source` with backpressure. */
export function followBody(prefix: BodyPrefix, source: Readable): Readable {
  return new FollowingBody(prefix, source);
}

class FollowingBody extends Readable {
  private readonly source: Readable;
  private ended: boolean;

  constructor(prefix: BodyPrefix, source: Readable) {
    super();
    this.source = source;
    this.ended = prefix.ended;
    for (const c of prefix.chunks) this.push(c);
    if (prefix.ended) { this.push(null); return; }
    source.on('data', (c: Buffer) => { if (!this.push(c)) source.pause(); });
    source.once('end', () => { this.ended = true; this.push(null); });
    source.once('error', (err: Error) => this.destroy(err));
    source.once('close', () => { if (!this.ended) this.destroy(new Error('downstream closed')); });
  }

  override _read(): void {
    if (!this.ended && this.source.isPaused()) this.source.resume();
  }
}
