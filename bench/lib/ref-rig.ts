/**
 * What the tools that compare builds share (cpu-per-request.ts, instructions-per-request.ts): each ref
 * extracted (lib/builds.ts) into one temp dir, the compile caches warmed, and one nginx backend
 * (return 200 "hello") on a free port.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { extractRef, warmCompileCaches } from './builds.ts';
import { freePort } from './net.ts';
import { nginxBackendConf } from './peer-configs.ts';
import { stopProcess, type Proc } from './procs.ts';
import { startNginx } from './targets.ts';

export interface RefRig {
  readonly tmp: string;
  /** ref → the skua-proxy entry point to run for it. */
  readonly mains: ReadonlyMap<string, string>;
  readonly backendPort: number;
  readonly backend: Proc;
}

export async function startRefRig(refs: readonly string[], tmpPrefix: string): Promise<RefRig> {
  const tmp = mkdtempSync(path.join(os.tmpdir(), tmpPrefix));
  const mains = new Map(refs.map((r) => [r, extractRef(r, tmp)]));
  warmCompileCaches(refs.map((r) => ({ name: r, main: mains.get(r) ?? '' })), path.join(tmp, 'compile-cache'), (m) => console.log(m));
  const backendPort = await freePort();
  const backend = await startNginx('backend', tmp, nginxBackendConf(tmp, backendPort), backendPort);
  return { tmp, mains, backendPort, backend };
}

export async function stopRefRig(rig: RefRig): Promise<void> {
  await stopProcess(rig.backend);
  rmSync(rig.tmp, { recursive: true, force: true });
}
