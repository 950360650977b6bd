/**
 * A small stand-in for istio-cni's node agent, for tests and the demo: it serves ZDS on a unix
 * SEQPACKET socket; when ztunnel connects (and says hello) it sends every known pod (AddWorkload
 * with the pod's netns fd) then SnapshotSent, and afterwards each pod added or deleted. Every
 * request waits for ztunnel's Ack; the acks are kept for inspection.
 */
import { closeSync, openSync, rmSync } from 'node:fs';
import { log, SeqpacketServer, type SeqpacketSocket } from '../core.ts';
import { decodeAck, decodeHello, encodeRequest, type WorkloadInfo, type WorkloadRequest } from '../inpod/zds-messages.ts';

export interface StandInPod {
  readonly uid: string;
  readonly info: WorkloadInfo;
  /** /var/run/netns/<name>. */
  readonly netnsPath: string;
}

export interface AckRecord {
  readonly request: WorkloadRequest;
  readonly error: string;
}

export class CniStandIn {
  readonly path: string;
  private server: SeqpacketServer | undefined;
  private conn: SeqpacketSocket | undefined;
  private readonly pods = new Map<string, StandInPod>();
  private queue: Promise<unknown> = Promise.resolve();
  readonly acks: AckRecord[] = [];
  /** Resolves each time a ztunnel finished receiving the snapshot. */
  private snapshotWaiters: Array<() => void> = [];
  snapshots = 0;
  private stopped = false;
  /** Called with each Ack as it arrives (the cni-standin command logs them). */
  onAck: ((ack: AckRecord) => void) | undefined;

  constructor(path: string) {
    this.path = path;
  }

  start(): void {
    rmSync(this.path, { force: true });
    this.server = new SeqpacketServer(this.path);
    void this.acceptLoop();
  }

  private async acceptLoop(): Promise<void> {
    while (!this.stopped && this.server) {
      const conn = await this.server.accept();
      if (!conn) return;
      this.conn?.close();
      this.conn = conn;
      this.queue = this.queue.then(() => this.greet(conn)).catch((e: Error) => log.warn(`cni stand-in: ${e.message}`));
    }
  }

  private async greet(conn: SeqpacketSocket): Promise<void> {
    const hello = await conn.receive();
    if (!hello) throw new Error('ztunnel closed before saying hello');
    if (decodeHello(hello.data) !== 1) throw new Error('ztunnel said hello with an unknown ZDS version');
    for (const pod of this.pods.values()) await this.send(conn, { kind: 'add', uid: pod.uid, info: pod.info }, pod.netnsPath);
    await this.send(conn, { kind: 'snapshot_sent' });
    this.snapshots++;
    for (const w of this.snapshotWaiters.splice(0)) w();
  }

  /** Waits for the next completed snapshot (a ztunnel connected and was told every pod). */
  nextSnapshot(): Promise<void> {
    return new Promise((resolve) => this.snapshotWaiters.push(resolve));
  }

  private async send(conn: SeqpacketSocket, request: WorkloadRequest, netnsPath?: string): Promise<string> {
    const fd = netnsPath ? openSync(netnsPath, 'r') : -1;
    try {
      conn.send(encodeRequest(request), fd >= 0 ? [fd] : []);
    } finally {
      if (fd >= 0) closeSync(fd);
    }
    const reply = await conn.receive();
    if (!reply) throw new Error(`ztunnel closed before acking ${request.kind}`);
    const error = decodeAck(reply.data);
    if (error === undefined) throw new Error('ztunnel answered without an Ack');
    const ack = { request, error };
    this.acks.push(ack);
    this.onAck?.(ack);
    return error;
  }

  /** Serialises a request behind the others; resolves to ztunnel's Ack error ('' = ok, undefined = no ztunnel). */
  private enqueue(request: WorkloadRequest, netnsPath?: string): Promise<string | undefined> {
    const next = this.queue.then(() => (this.conn && !this.conn.closed ? this.send(this.conn, request, netnsPath) : undefined));
    this.queue = next.catch(() => undefined);
    return next;
  }

  addPod(pod: StandInPod): Promise<string | undefined> {
    this.pods.set(pod.uid, pod);
    return this.enqueue({ kind: 'add', uid: pod.uid, info: pod.info }, pod.netnsPath);
  }

  delPod(uid: string): Promise<string | undefined> {
    this.pods.delete(uid);
    return this.enqueue({ kind: 'del', uid });
  }

  /** Forgets a pod without telling ztunnel (it was deleted while ztunnel was away). */
  forgetPod(uid: string): void {
    this.pods.delete(uid);
  }

  /** Drops the current ztunnel connection (the agent restarting). */
  disconnect(): void {
    this.conn?.close();
    this.conn = undefined;
  }

  close(): void {
    this.stopped = true;
    this.conn?.close();
    this.server?.close();
    rmSync(this.path, { force: true });
  }
}
