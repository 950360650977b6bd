/**
 * ztunnel's side of ZDS: connect to the CNI agent's unix SEQPACKET socket (INPOD_UDS, default
 * /var/run/ztunnel/ztunnel.sock), say ZdsHello, then answer each WorkloadRequest with an Ack
 * (error '' on success). A broken connection is retried with back-off (10 ms doubling to 15 s);
 * the pods keep running meanwhile and the next snapshot reconciles them.
 */
import { closeSync } from 'node:fs';
import { log, SeqpacketSocket, type SeqpacketMessage } from '../core.ts';
import { decodeRequest, encodeAck, encodeHello } from './zds-messages.ts';
import type { WorkloadManager } from './workload-manager.ts';

const MAX_BACKOFF_MS = 15_000;

export class ZdsClient {
  private readonly path: string;
  private readonly manager: WorkloadManager;
  private socket: SeqpacketSocket | undefined;
  private stopped = false;
  private loop: Promise<void> | undefined;
  private sleepTimer: NodeJS.Timeout | undefined;
  private wake: (() => void) | undefined;
  /** Connections made (tests). */
  connections = 0;
  connected = false;

  constructor(path: string, manager: WorkloadManager) {
    this.path = path;
    this.manager = manager;
  }

  start(): void {
    this.loop ??= this.run();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.sleepTimer);
    this.wake?.();
    this.socket?.close();
    await this.loop;
  }

  private async run(): Promise<void> {
    let backoff = 10;
    while (!this.stopped) {
      let sock: SeqpacketSocket;
      try {
        sock = SeqpacketSocket.connect(this.path);
      } catch (e) {
        backoff = Math.min(MAX_BACKOFF_MS, backoff * 2);
        log.warn(`in-pod: failed to connect to the Istio CNI node agent over ${this.path}, is the node agent healthy? details: ${(e as Error).message}. retrying in ${backoff}ms`);
        await this.sleep(backoff);
        continue;
      }
      backoff = 10;
      this.socket = sock;
      this.connections++;
      this.connected = true;
      this.manager.connectionReset();
      try {
        sock.send(encodeHello());
        await this.serve(sock);
      } catch (e) {
        if (!this.stopped) log.warn(`in-pod: ZDS connection failed: ${(e as Error).message}`);
      } finally {
        this.connected = false;
        sock.close();
        this.socket = undefined;
      }
      if (!this.stopped) await this.sleep(backoff);
    }
  }

  private async serve(sock: SeqpacketSocket): Promise<void> {
    for (;;) {
      const msg = await sock.receive();
      if (!msg) return;
      const error = await this.handle(msg);
      if (sock.closed) return;
      sock.send(encodeAck(error));
    }
  }

  /** One request; returns the Ack's error ('' when it went well). Fds not taken are closed. */
  private async handle(msg: SeqpacketMessage): Promise<string> {
    let fds = [...msg.fds];
    try {
      const req = decodeRequest(msg.data);
      switch (req.kind) {
        case 'add': {
          if (fds.length !== 1) return `AddWorkload ${req.uid}: expected exactly one netns fd, got ${fds.length}`;
          if (!req.info) return `AddWorkload ${req.uid}: workload_info is required`;
          const fd = fds[0];
          fds = [];
          await this.manager.add(req.uid, req.info, fd);
          return '';
        }
        case 'keep': this.manager.keep(req.uid); return '';
        case 'del': this.manager.del(req.uid); return '';
        default: this.manager.snapshotSent(); return '';
      }
    } catch (e) {
      return (e as Error).message;
    } finally {
      for (const fd of fds) closeSync(fd);
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.sleepTimer = setTimeout(resolve, ms);
    });
  }
}
