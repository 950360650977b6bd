/**
 * In-pod mode's pods, as the CNI agent reports them over ZDS: one set of proxies per pod, started
 * in the pod's network namespace (AddWorkload brings its fd), kept across a reconnect when the CNI
 * says Keep, drained on DelWorkload, and, once SnapshotSent arrives, every pod the snapshot did not
 * name is drained. A pod whose proxies fail to start is retried every 5 s.
 */
import { closeSync, fstatSync } from 'node:fs';
import { log } from '../core.ts';
import type { LocalWorkloadState } from '../admin/config-dump.ts';
import type { WorkloadInfo } from './zds-messages.ts';

export interface InpodWorkload {
  readonly uid: string;
  readonly info: WorkloadInfo;
  /** The pod's network namespace (owned by the manager; closed when the pod goes). */
  readonly netnsFd: number;
  /** Inode of the namespace: a new one for the same uid means the sandbox was re-created. */
  readonly netnsIno: number;
}

export interface PodProxies {
  /** Stops accepting, drains, closes; resolves when done. */
  close(): Promise<void>;
}

export type StartPod = (pod: InpodWorkload) => Promise<PodProxies>;

interface PodEntry {
  pod: InpodWorkload;
  proxies: PodProxies | undefined;
}

export const RETRY_MS = 5000;

export class WorkloadManager {
  private readonly start: StartPod;
  private readonly pods = new Map<string, PodEntry>();
  private readonly pending = new Map<string, InpodWorkload>();
  private snapshotNames = new Set<string>();
  private snapshotReceived = false;
  private retryTimer: NodeJS.Timeout | undefined;
  private readonly draining = new Set<Promise<void>>();
  started = 0;
  stopped = 0;

  constructor(start: StartPod) {
    this.start = start;
  }

  get ready(): boolean {
    return this.snapshotReceived;
  }

  /** A new ZDS connection: the CNI will send a fresh snapshot. */
  connectionReset(): void {
    this.snapshotReceived = false;
    this.snapshotNames = new Set();
  }

  async add(uid: string, info: WorkloadInfo, netnsFd: number): Promise<void> {
    const pod: InpodWorkload = { uid, info, netnsFd, netnsIno: fstatSync(netnsFd).ino };
    if (!this.snapshotReceived) this.snapshotNames.add(uid);
    const existing = this.pods.get(uid);
    if (existing) {
      if (existing.pod.netnsIno === pod.netnsIno) { closeSync(netnsFd); return; }
      // Same pod, new sandbox: drain the old proxies first.
      this.del(uid);
    }
    const stale = this.pending.get(uid);
    if (stale && stale.netnsFd !== netnsFd) closeSync(stale.netnsFd);
    this.pending.delete(uid);
    try {
      await this.startPod(pod);
    } catch (e) {
      this.pending.set(uid, pod);
      this.armRetry();
      throw e;
    }
  }

  private async startPod(pod: InpodWorkload): Promise<void> {
    const entry: PodEntry = { pod, proxies: undefined };
    this.pods.set(pod.uid, entry);
    try {
      entry.proxies = await this.start(pod);
      this.started++;
    } catch (e) {
      this.pods.delete(pod.uid);
      throw e;
    }
    // Deleted while starting: stop now.
    if (this.pods.get(pod.uid) !== entry) this.shutdown(entry);
  }

  keep(uid: string): void {
    if (this.snapshotReceived) throw new Error('pod keep received after snapshot');
    this.snapshotNames.add(uid);
  }

  del(uid: string): void {
    const p = this.pending.get(uid);
    if (p) { closeSync(p.netnsFd); this.pending.delete(uid); }
    if (!this.snapshotReceived) this.snapshotNames.delete(uid);
    const entry = this.pods.get(uid);
    if (!entry) return;
    this.pods.delete(uid);
    this.shutdown(entry);
  }

  snapshotSent(): void {
    if (this.snapshotReceived) throw new Error('pod snapshot received already');
    for (const [uid, entry] of [...this.pods]) {
      if (this.snapshotNames.has(uid)) continue;
      this.pods.delete(uid);
      this.shutdown(entry);
    }
    this.snapshotNames.clear();
    this.snapshotReceived = true;
  }

  private shutdown(entry: PodEntry): void {
    const done = (async () => {
      try {
        await entry.proxies?.close();
      } catch (e) {
        log.warn(`in-pod: stopping proxies of ${entry.pod.uid}: ${(e as Error).message}`);
      } finally {
        closeSync(entry.pod.netnsFd);
        if (entry.proxies) this.stopped++;
      }
    })();
    this.draining.add(done);
    void done.finally(() => this.draining.delete(done));
  }

  private armRetry(): void {
    if (this.retryTimer) return;
    this.retryTimer = setTimeout(() => {
      this.retryTimer = undefined;
      for (const [uid, pod] of [...this.pending]) {
        this.pending.delete(uid);
        this.startPod(pod).catch((e: Error) => {
          log.warn(`in-pod: starting proxies of ${uid} failed again: ${e.message}`);
          this.pending.set(uid, pod);
          this.armRetry();
        });
      }
    }, RETRY_MS);
    this.retryTimer.unref();
  }

  /** Pods for the admin's workloadState: Up when the proxies run, Pending while they wait for a retry. */
  locals(): LocalWorkloadState[] {
    const out: LocalWorkloadState[] = [];
    for (const e of this.pods.values()) out.push({ uid: e.pod.uid, ...e.pod.info, state: e.proxies ? 'Up' : 'Pending' });
    for (const p of this.pending.values()) out.push({ uid: p.uid, ...p.info, state: 'Pending' });
    return out;
  }

  has(uid: string): boolean {
    return this.pods.has(uid);
  }

  /** Drains every pod (SIGTERM). */
  async drainAll(): Promise<void> {
    clearTimeout(this.retryTimer);
    for (const [uid, entry] of [...this.pods]) { this.pods.delete(uid); this.shutdown(entry); }
    for (const p of this.pending.values()) closeSync(p.netnsFd);
    this.pending.clear();
    await Promise.all([...this.draining]);
  }
}
