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
/** What ships (the image's entrypoint): it enables Node's compile cache, which src/main.ts alone does not. */
export const DEFAULT_SKUA_MAIN = 'packages/proxy/bin/skua-proxy.js';
export const SKUA_READY_TIMEOUT_MS = 10_000;

/** A target with its ports chosen and its configuration written, not yet started. */
export interface PreparedTarget {
  target: TargetName;
  kind: ProxyKind;
  label: string;
  /** Where the load generator connects. */
  port: number;
  /** Where the target forwards to. */
  upstreamPort?: number;
  /** Envoy admin port (skua only). */
  adminPort?: number;
  /** The configuration text exactly as the target reads it (none for direct). */
  config?: string;
  configFile?: string;
}

export interface RunningTarget extends PreparedTarget {
  proc?: Proc;
}

export function targetLabel(target: TargetName, kind: ProxyKind): string {
  switch (target) {
    case 'direct': return 'direct';
    case 'nginx': return kind === 'http' ? 'nginx' : 'nginx (stream)';
    case 'haproxy': return kind === 'http' ? 'haproxy (http)' : 'haproxy (tcp)';
    case 'node-relay': return 'bare Node relay (no HTTP)';
    case 'skua': return 'skua-proxy';
  }
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

function startNginxFile(name: string, file: string, port: number): Promise<Proc> {
  const prefix = path.dirname(file);
  return listening(startProcess(name, systemBinary('nginx'), ['-p', prefix, '-c', file, '-e', 'stderr']), port);
}

/** Start nginx with its own prefix and config under `dir`. */
export function startNginx(name: string, dir: string, conf: string, port: number): Promise<Proc> {
  const file = path.join(dir, `${name}.conf`);
  writeFileSync(file, conf);
  return startNginxFile(name, file, port);
}

function configText(t: PreparedTarget, dir: string, upstreamPort: number): string {
  const http = t.kind === 'http';
  switch (t.target) {
    case 'nginx': return http ? nginxHttpProxyConf(dir, t.port, upstreamPort) : nginxTcpProxyConf(dir, t.port, upstreamPort);
    case 'haproxy': return haproxyConf(t.kind, t.port, upstreamPort);
    case 'skua': {
      const admin = t.adminPort ?? 0;
      return http ? httpProxyBootstrap(admin, t.port, upstreamPort) : tcpProxyBootstrap(admin, t.port, upstreamPort);
    }
    case 'node-relay': return `node ${NODE_RELAY} ${t.port} ${upstreamPort}\n`;
    case 'direct': return '';
  }
}

/** bench/lib/node-relay.ts, relative to the repository root (the floor of a Node proxy). */
const NODE_RELAY = 'bench/lib/node-relay.ts';

const CONFIG_EXT: Record<TargetName, string> = { direct: '', nginx: 'conf', haproxy: 'cfg', 'node-relay': 'txt', skua: 'yaml' };

/** Choose ports and write the target's configuration under `dir`. */
export async function prepareTarget(
  target: TargetName, kind: ProxyKind, upstreamPort: number, dir: string,
): Promise<PreparedTarget> {
  const label = targetLabel(target, kind);
  if (target === 'direct') return { target, kind, label, port: upstreamPort };
  const t: PreparedTarget = { target, kind, label, port: await freePort(), upstreamPort };
  if (target === 'skua') t.adminPort = await freePort();
  t.config = configText(t, dir, upstreamPort);
  t.configFile = path.join(dir, `${target}-${kind}.${CONFIG_EXT[target]}`);
  writeFileSync(t.configFile, t.config);
  return t;
}

async function launchSkua(t: PreparedTarget, file: string, main: string, env?: Record<string, string>): Promise<Proc> {
  if (!existsSync(path.resolve(REPO_ROOT, main))) {
    throw new Error(`skua-proxy entry point ${main} does not exist (yet)`);
  }
  const args = [main, '-c', file, '--concurrency', '1', '-l', 'warn'];
  const proc = startProcess(`skua-${t.kind}`, process.execPath, args, { cwd: REPO_ROOT, env });
  try {
    await waitForReady(t.adminPort ?? 0, proc, SKUA_READY_TIMEOUT_MS);
    await waitForPort(t.port, proc, 2000);
  } catch (err) {
    await stopProcess(proc);
    throw new Error(`skua-proxy: ${(err as Error).message}\n(its bootstrap is recorded in the JSON result)`);
  }
  return proc;
}

/**
 * Start a prepared target and wait until it serves; `skuaMain` is relative to the repository root,
 * `skuaEnv` (a build's NODE_OPTIONS) is added to skua's environment.
 */
export async function launchTarget(t: PreparedTarget, skuaMain: string, skuaEnv?: Record<string, string>): Promise<RunningTarget> {
  const file = t.configFile ?? '';
  const name = `${t.target}-${t.kind}`;
  switch (t.target) {
    case 'direct': return t;
    case 'nginx': return { ...t, proc: await startNginxFile(name, file, t.port) };
    case 'haproxy': return { ...t, proc: await listening(startProcess(name, systemBinary('haproxy'), ['-db', '-f', file]), t.port) };
    case 'node-relay': {
      const args = [NODE_RELAY, String(t.port), String(t.upstreamPort)];
      return { ...t, proc: await listening(startProcess(name, process.execPath, args, { cwd: REPO_ROOT }), t.port) };
    }
    case 'skua': return { ...t, proc: await launchSkua(t, file, skuaMain, skuaEnv) };
  }
}

export async function stopTarget(t: RunningTarget): Promise<void> {
  if (t.proc) await stopProcess(t.proc);
}
