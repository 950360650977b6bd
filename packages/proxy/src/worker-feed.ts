/**
 * xDS updates for one --concurrency worker, one message in flight at a time: the worker says
 * `{ applied: true }` when it has applied one, and only then gets the next. A worker drains every
 * pending message in one go (deserialising each is synchronous), so a burst of queued chunks
 * would block its loop; fed one at a time, each costs one bounded task.
 */
import type { Worker } from 'node:worker_threads';

export class WorkerFeed {
  private readonly worker: Worker;
  private readonly queue: unknown[] = [];
  private head = 0;
  private inFlight = false;

  constructor(worker: Worker) {
    this.worker = worker;
  }

  send(message: unknown): void {
    this.queue.push(message);
    this.pump();
  }

  /** The worker applied the message in flight. */
  applied(): void {
    this.inFlight = false;
    this.pump();
  }

  private pump(): void {
    if (this.inFlight || this.head === this.queue.length) return;
    const m = this.queue[this.head];
    this.queue[this.head++] = undefined;
    if (this.head === this.queue.length) { this.queue.length = 0; this.head = 0; }
    this.inFlight = true;
    this.worker.postMessage(m);
  }
}
