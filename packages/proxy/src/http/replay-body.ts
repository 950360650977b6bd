import { Readable } from 'node:stream';

/** Envoy's default per-connection buffer limit: a body larger than this is not retried. */
export const RETRY_BUFFER_LIMIT = 1 << 20;

/**
 * A request body that can be sent more than once (retries, mirrors): chunks
 * are kept while they fit in the limit, and each reader replays them and then
 * follows the live source. Only the newest reader applies backpressure.
 */
export class ReplayableBody {
  private readonly source: Readable;
  private readonly limit: number;
  private readonly chunks: Buffer[] = [];
  private size = 0;
  private ended = false;
  private failed: Error | undefined;
  private current: BodyReader | undefined;
  /** False once the body outgrew the limit: later readers cannot be made. */
  replayable = true;
  /** Bytes received from downstream (BYTES_RECEIVED). */
  received = 0;

  constructor(source: Readable, limit = RETRY_BUFFER_LIMIT) {
    this.source = source;
    this.limit = limit;
    source.on('data', (chunk: Buffer) => this.onData(chunk));
    source.once('end', () => { this.ended = true; this.current?.push(null); });
    source.once('error', (err: Error) => { this.failed = err; this.current?.destroy(err); });
  }

  private onData(chunk: Buffer): void {
    this.received += chunk.length;
    if (this.replayable) {
      this.size += chunk.length;
      if (this.size > this.limit) { this.replayable = false; this.chunks.length = 0; } else this.chunks.push(chunk);
    }
    if (this.current && !this.current.push(chunk)) this.source.pause();
  }

  /** A fresh reader from byte 0, or undefined when the body can no longer be replayed. */
  reader(): Readable | undefined {
    if (this.current && !this.replayable) return undefined;
    const r = new BodyReader(this);
    this.current?.detach();
    this.current = r;
    for (const c of this.chunks) r.push(c);
    if (this.failed) r.destroy(this.failed);
    else if (this.ended) r.push(null);
    return r;
  }

  /** Whether every byte has arrived (a retry with a partial body cannot be replayed). */
  get complete(): boolean { return this.ended; }

  /** Runs `fn` once the whole body has arrived (now, if it already has). */
  whenComplete(fn: () => void): void {
    if (this.ended) fn(); else this.source.once('end', fn);
  }

  /** An independent copy of a complete body (mirrors): it never takes over backpressure. */
  replay(): Readable {
    return Readable.from(this.chunks.slice());
  }

  resumeSource(reader: BodyReader): void {
    if (reader === this.current && this.source.isPaused() && !this.ended) this.source.resume();
  }
}

class BodyReader extends Readable {
  private readonly owner: ReplayableBody;
  private detached = false;
  constructor(owner: ReplayableBody) {
    super();
    this.owner = owner;
  }
  override _read(): void {
    if (!this.detached) this.owner.resumeSource(this);
  }
  detach(): void {
    this.detached = true;
    this.destroy();
  }
}
