/**
 * xDS updates for one --concurrency worker, one message in flight at a time: the worker says
 * `{ applied: true }` when it has applied one, and only then gets the next. A worker drains every
 * pending message in one go (deserialising each is synchronous), so a burst of queued chunks
 * would block its loop; fed one at a time, each costs one bounded task. send() resolves once the
 * worker has applied the message: the main thread ACKs an update only when every thread serves it.
 */
import type { Worker } from 'node:worker_threads';

interface Pending {
  readonly message: unknown;
  readonly done: () => void;
}

export class WorkerFeed {
  private readonly worker: Worker;
  private readonly queue: Array<Pending | undefined> = [];
  private head = 0;
  private inFlight: Pending | undefined;
  private gone = false;

  constructor(worker: Worker) {
    this.worker = worker;
  }

  send(message: unknown): Promise<void> {
    if (this.gone) return Promise.resolve();
    return new Promise((done) => {
      this.queue.push({ message, done });
      this.pump();
    });
  }

  /** The worker applied the message in flight. */
  applied(): void {
    const p = this.inFlight;
    this.inFlight = undefined;
    p?.done();
    this.pump();
  }

  /** The worker exited: nothing it was sent will be applied; nobody waits for it. */
  exited(): void {
    this.gone = true;
    this.inFlight?.done();
    this.inFlight = undefined;
    for (let i = this.head; i < this.queue.length; i++) this.queue[i]?.done();
    this.queue.length = 0;
    this.head = 0;
  }

  private pump(): void {
    if (this.inFlight || this.gone || this.head === this.queue.length) return;
    const p = this.queue[this.head]!;
    this.queue[this.head++] = undefined;
    if (this.head === this.queue.length) { this.queue.length = 0; this.head = 0; }
    this.inFlight = p;
    this.worker.postMessage(p.message);
  }
}
