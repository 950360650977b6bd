/**
 * Starting one target (the thing under test) in front of an upstream port:
 * direct (no proxy), nginx, haproxy or skua-proxy, one worker each.
 */
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startProcess, stopProcess, systemBinary, type Proc } from './procs.ts';
import { freePort, waitForPort, waitForReady } from './net.ts';
import { haproxyConf, nginxHttpProxyConf, nginxTcpProxyConf } from './peer-configs.ts';
import { httpProxyBootstrap, tcpProxyBootstrap } from './bootstrap.ts';
import type { TargetName } from './types.ts';

export type ProxyKind = 'http' | 'tcp';

export const REPO_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SKUA_MAIN = 'packages/proxy/src/main.ts';
export const SKUA_READY_TIMEOUT_MS = 10_000;

export interface RunningTarget {
  target: TargetName;
  label: string;
  /** Where the load generator connects. */
  port: number;
  proc?: Proc;
}

export function targetLabel(target: TargetName, kind: ProxyKind): string {
  switch (target) {
    case 'direct': return 'direct';
    case 'nginx': return kind === 'http' ? 'nginx' : 'nginx (stream)';
    case 'haproxy': return kind === 'http' ? 'haproxy (http)' : 'haproxy (tcp)';
    case 'skua': return 'skua-proxy';
  }
}

/** Start nginx with its own prefix and config under `dir`. */
export async function startNginx(name: string, dir: string, conf: string, port: number): Promise<Proc> {
  const file = path.join(dir, `${name}.conf`);
  writeFileSync(file, conf);
  const proc = startProcess(name, systemBinary('nginx'), ['-p', dir, '-c', file, '-e', 'stderr']);
  return listening(proc, port);
}

/** Wait for `proc` to accept connections on `port`; stop it if it does not. */
async function listening(proc: Proc, port: number): Promise<Proc> {
  try {
    await waitForPort(port, proc);
  } catch (err) {
    await stopProcess(proc);
    throw err;
  }
  return proc;
}

async function startHaproxy(kind: ProxyKind, dir: string, port: number, upstreamPort: number): Promise<Proc> {
  const file = path.join(dir, `haproxy-${kind}.cfg`);
  writeFileSync(file, haproxyConf(kind, port, upstreamPort));
  const proc = startProcess(`haproxy-${kind}`, systemBinary('haproxy'), ['-db', '-f', file]);
  return listening(proc, port);
}

async function startSkua(kind: ProxyKind, dir: string, port: number, upstreamPort: number): Promise<Proc> {
  if (!existsSync(path.join(REPO_ROOT, SKUA_MAIN))) {
    throw new Error(`skua-proxy entry point ${SKUA_MAIN} does not exist yet`);
  }
  const adminPort = await freePort();
  const file = path.join(dir, `skua-${kind}.yaml`);
  const yaml = kind === 'http'
    ? httpProxyBootstrap(adminPort, port, upstreamPort)
    : tcpProxyBootstrap(adminPort, port, upstreamPort);
  writeFileSync(file, yaml);
  const args = [SKUA_MAIN, '-c', file, '--concurrency', '1', '-l', 'warn'];
  const proc = startProcess(`skua-${kind}`, process.execPath, args, { cwd: REPO_ROOT });
  try {
    await waitForReady(adminPort, proc, SKUA_READY_TIMEOUT_MS);
    await waitForPort(port, proc, 2000);
  } catch (err) {
    await stopProcess(proc);
    throw new Error(`skua-proxy: ${(err as Error).message}\n(bootstrap: ${file})`);
  }
  return proc;
}

export async function startTarget(
  target: TargetName, kind: ProxyKind, upstreamPort: number, dir: string,
): Promise<RunningTarget> {
  const label = targetLabel(target, kind);
  if (target === 'direct') return { target, label, port: upstreamPort };
  const port = await freePort();
  let proc: Proc;
  if (target === 'nginx') {
    const conf = kind === 'http'
      ? nginxHttpProxyConf(dir, port, upstreamPort)
      : nginxTcpProxyConf(dir, port, upstreamPort);
    proc = await startNginx(`nginx-${kind}`, dir, conf, port);
  } else if (target === 'haproxy') {
    proc = await startHaproxy(kind, dir, port, upstreamPort);
  } else {
    proc = await startSkua(kind, dir, port, upstreamPort);
  }
  return { target, label, port, proc };
}

export async function stopTarget(t: RunningTarget): Promise<void> {
  if (t.proc) await stopProcess(t.proc);
}
