/**
 * The CNI plugin's half of the stand-in, for pods the node agent cannot see being created (compose):
 * a process inside the pod's network namespace (a per-pod init container) sends its own
 * /proc/self/ns/net, by SCM_RIGHTS, with the pod's namespace, name and service account, to the
 * stand-in's plugin socket, and waits for the answer — as istio-cni's plugin tells its node agent
 * about each new pod and returns once the pod is set up. One JSON message each way on a unix
 * SEQPACKET connection: {namespace, name, serviceAccount} + the fd → {error: '' | why}.
 */
import { closeSync, openSync } from 'node:fs';
import { SeqpacketServer, SeqpacketSocket } from '../core.ts';
import type { WorkloadInfo } from '../inpod/zds-messages.ts';

/** The stand-in's answer to one pod: '' when it is set up, else why not. */
export type AddPod = (info: WorkloadInfo, netnsFd: number) => Promise<string>;

function parseInfo(data: Buffer): WorkloadInfo {
  let v: unknown;
  try { v = JSON.parse(data.toString('utf8')); } catch { throw new Error('the plugin message is not JSON'); }
  const o = (v ?? {}) as Record<string, unknown>;
  for (const k of ['namespace', 'name', 'serviceAccount']) {
    if (typeof o[k] !== 'string' || !/^[^/=\s]+$/.test(o[k])) throw new Error(`the plugin message has no valid ${k}`);
  }
  return { namespace: o.namespace as string, name: o.name as string, serviceAccount: o.serviceAccount as string };
}

/** The node agent's side: each connection brings one pod and gets one answer. */
export class PluginServer {
  readonly path: string;
  private readonly server: SeqpacketServer;
  private readonly add: AddPod;
  private stopped = false;

  constructor(path: string, add: AddPod) {
    this.path = path;
    this.add = add;
    this.server = new SeqpacketServer(path);
    void this.acceptLoop();
  }

  private async acceptLoop(): Promise<void> {
    while (!this.stopped) {
      const conn = await this.server.accept();
      if (!conn) return;
      void this.serve(conn);
    }
  }

  private async serve(conn: SeqpacketSocket): Promise<void> {
    let error: string;
    try {
      const msg = await conn.receive();
      if (!msg) { conn.close(); return; }
      const [fd, ...extra] = msg.fds;
      for (const x of extra) closeSync(x);
      if (fd === undefined) error = 'the plugin message carries no network namespace';
      else {
        let info: WorkloadInfo | undefined;
        try { info = parseInfo(msg.data); } catch (e) { closeSync(fd); throw e; }
        error = await this.add(info, fd);
      }
    } catch (e) {
      error = (e as Error).message;
    }
    try { conn.send(Buffer.from(JSON.stringify({ error }))); } catch { /* the plugin went away */ }
    conn.close();
  }

  close(): void {
    this.stopped = true;
    this.server.close();
  }
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The plugin's side: sends this process's network namespace as `info`'s pod; retries connecting
 * until `timeoutMs` (the node agent may start after the pod). Resolves when the stand-in set the
 * pod up; throws with the stand-in's reason, or why it could not be reached.
 */
export async function registerPod(path: string, info: WorkloadInfo, timeoutMs: number, netnsPath = '/proc/self/ns/net'): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let conn: SeqpacketSocket | undefined;
  for (;;) {
    try { conn = SeqpacketSocket.connect(path); break; } catch (e) {
      if (Date.now() > deadline) throw new Error(`no CNI stand-in at ${path} after ${timeoutMs / 1000} s: ${(e as Error).message}`);
      await sleep(500);
    }
  }
  const fd = openSync(netnsPath, 'r');
  try {
    conn.send(Buffer.from(JSON.stringify(info)), [fd]);
  } finally {
    closeSync(fd);
  }
  const timer = setTimeout(() => conn.close(), Math.max(1000, deadline - Date.now()));
  try {
    const reply = await conn.receive();
    if (!reply) throw new Error(`the CNI stand-in at ${path} closed without answering`);
    const { error } = JSON.parse(reply.data.toString('utf8')) as { error?: string };
    if (error) throw new Error(`the CNI stand-in refused ${info.namespace}/${info.name}: ${error}`);
  } finally {
    clearTimeout(timer);
    conn.close();
  }
}
