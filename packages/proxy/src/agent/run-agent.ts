/**
 * `skua-proxy proxy sidecar|router|waypoint [flags]` (pilot-agent's `proxy`): work out the
 * node and bootstrap from the environment, write the bootstrap where pilot-agent writes it
 * (<configPath>/envoy-rev.json, so /config_dump and the workers read the same file), and run
 * the proxy in this process with the agent's xDS credentials.
 * `skua-proxy wait` (pilot-agent's `wait`): poll the readiness URL until it answers 200.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname } from 'node:path';
import type { Server } from 'node:http';
import { UsageError, type ProxyArgs } from './cli.ts';
import { PILOT_PROXY_HELP, PILOT_USAGE, PILOT_WAIT_HELP, envoyComponentLogLevel, parsePilotProxyArgs, parsePilotWaitArgs } from './pilot-cli.ts';
import { agentSettings, type AgentSettings } from './agent-settings.ts';
import { renderBootstrap } from './bootstrap-render.ts';
import { xdsHeaders } from './xds-credentials.ts';
import { startStatusServer, type ProxySource, type StatusServerOptions } from './status-server.ts';
import { AgentLifecycle } from './lifecycle.ts';
import { parseAppProbers, probeTarget } from './app-probers.ts';
import { parseScrapeConfig } from './app-metrics.ts';
import { createAgentMetrics } from './agent-metrics.ts';
import { parseGoBool } from './metadata-fields.ts';
import { startAgentDns, type AgentDns } from '../dns/agent-dns.ts';
import { TYPE_URL } from '../xds/discovery.ts';
import { compileBootstrap, loadBootstrapSource, type BootstrapConfig } from '../config/bootstrap.ts';
import { ConfigError } from '../core/errors.ts';
import { applyLogFlags, log, setLogLevel } from '../core/log.ts';
import { ISTIO_JSON_LOG_FORMAT, ISTIO_LOG_FORMAT } from '../core/log-format.ts';
import { explainError } from '../core/explain-error.ts';
import { trimNativeHeapPeriodically } from '../core/native-heap-trim.ts';
import { collectStartUpGarbage } from '../core/startup-heap.ts';
import { ProxyServer } from '../server.ts';
import { startWorkers } from '../workers.ts';

function usageExit(err: unknown, help: string): number {
  if (!(err instanceof UsageError)) throw err;
  if (!err.message) { process.stdout.write(`${help}\n`); return 0; }
  process.stderr.write(`Error: ${err.message}\n${PILOT_USAGE}\n`);
  return 1;
}

/** Returns an exit code, or -1 while the proxy runs. */
export async function runPilotProxy(argv: readonly string[]): Promise<number> {
  let args;
  try { args = parsePilotProxyArgs(argv); } catch (err) { return usageExit(err, PILOT_PROXY_HELP); }
  let settings: AgentSettings;
  try {
    settings = agentSettings({ args, env: process.env });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`Error: failed to get proxy config: ${err.message}\n`);
    return 1;
  }
  // pilot-agent starts Envoy with Istio's log format (JSON with --log_as_json) and the component levels.
  if (!setLogLevel(settings.logLevel)) setLogLevel('warning');
  const logError = applyLogFlags({ logLevel: log.level(), componentLogLevel: envoyComponentLogLevel(args.proxyLogLevel, args.proxyComponentLogLevel), logFormat: args.logAsJson ? ISTIO_JSON_LOG_FORMAT : ISTIO_LOG_FORMAT });
  if (logError) { process.stderr.write(`Error: --proxyLogLevel/--proxyComponentLogLevel: ${logError}\n`); return 1; }
  if (args.unknownFlags.length) log.warn(`pilot-agent flags not used by skua-proxy: ${args.unknownFlags.map((f) => `--${f}`).join(' ')}`);
  log.info(`proxy role: type=${settings.identity.type} id=${settings.node.id} ips=${settings.identity.ipAddresses.join(',')}`);

  let bootstrap: BootstrapConfig;
  try {
    if (settings.renderBootstrap) {
      mkdirSync(dirname(settings.bootstrapPath), { recursive: true });
      writeFileSync(settings.bootstrapPath, `${JSON.stringify(renderBootstrap(settings), null, 2)}\n`);
    }
    // pilot-agent starts Envoy with --allow-unknown-static-fields: unknown bootstrap fields are logged and counted.
    bootstrap = compileBootstrap(loadBootstrapSource(settings.bootstrapPath, undefined), { unknownFields: 'warn' });
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`error initializing configuration '${settings.bootstrapPath}': ${err.message}\n`);
    return 1;
  }

  let dns: AgentDns | undefined;
  try {
    dns = await maybeStartDns(settings);
  } catch (err) {
    process.stderr.write(`Error: DNS proxy: ${explainError(err)}\n`);
    return 1;
  }
  let server: ProxyServer | undefined;
  let status: Server | undefined;
  let statusOptions: StatusServerOptions;
  const exit = (code: number): void => {
    status?.close();
    void dns?.proxy.close();
    if (server) void server.shutdown(code); else process.exit(code);
  };
  const lifecycle = new AgentLifecycle(settings.lifecycle, () => (server?.state === 'LIVE' || server?.state === 'DRAINING' ? server : undefined), exit);
  // Installed before the status port and the certificate: a SIGTERM while starting exits 0 at once.
  for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => { void lifecycle.terminate(signal); });
  const proxySource = (): ProxySource | undefined => {
    const s = server;
    return s && { state: s.state, stats: s.stats, xds: s.bootstrap.dynamic !== undefined, collectStats: () => s.collectStats() };
  };
  try {
    statusOptions = { ...statusServerOptions(settings, proxySource, dns), lifecycle };
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err;
    process.stderr.write(`Error: ${err.message}\n`);
    return 1;
  }
  try {
    status = await startStatusServer(statusOptions);
  } catch (err) {
    process.stderr.write(`Error: status server on port ${settings.statusPort}: ${explainError(err)}\n`);
    return 1;
  }
  // istio-agent's CA client (CA_ADDR, as the injector sets it) or mounted certificates: the workload
  // certificate the SDS `default` / `ROOTCA` secrets name, before any listener opens.
  try {
    if (process.env.CA_ADDR || process.env.FILE_MOUNTED_CERTS) await (await import('../tls/identity.ts')).startIdentityFromEnv(process.env);
  } catch (err) {
    process.stderr.write(`Error: workload certificate: ${explainError(err)}\n`);
    status.close();
    return 1;
  }
  // pilot-agent starts Envoy with --drain-strategy immediate: once draining, every response asks to close.
  const proxyArgs: ProxyArgs = {
    configPath: settings.bootstrapPath, configYaml: '', mode: 'serve', concurrency: settings.concurrency,
    logLevel: settings.logLevel, drainTimeS: settings.drainTimeS, drainStrategy: 'immediate',
  };
  const xdsSinks = new Map(dns ? [[TYPE_URL.nameTable, dns.sink]] : []);
  server = new ProxyServer(bootstrap, { ...proxyArgs, reusePort: settings.concurrency > 1, admin: true, xdsHeaders: xdsHeaders(settings), xdsSinks });
  if (settings.concurrency > 1) await startWorkers(server, proxyArgs);
  else await server.start();
  collectStartUpGarbage();
  trimNativeHeapPeriodically();
  return -1;
}

/** 15020's settings from pilot-agent's environment: rewritten app probes, app metrics to merge, the agent's metrics. */
function statusServerOptions(settings: AgentSettings, proxy: () => ProxySource | undefined, dns: AgentDns | undefined): StatusServerOptions {
  const env = process.env;
  const sidecar = settings.identity.type === 'sidecar';
  return {
    port: settings.statusPort, proxy,
    probers: parseAppProbers(env.ISTIO_KUBE_APP_PROBERS ?? ''),
    probeTarget: probeTarget(env.INSTANCE_IP ?? '', parseGoBool(env.REWRITE_PROBE_LEGACY_LOCALHOST_DESTINATION ?? 'false') === true),
    scrapeTargets: sidecar ? parseScrapeConfig(env.ISTIO_PROMETHEUS_ANNOTATIONS, settings.statusPort) : [],
    metrics: createAgentMetrics(() => dns?.proxy),
    nameTable: () => dns?.lastTable(),
  };
}

/** pilot-agent's DNS capture switch: ISTIO_META_DNS_CAPTURE in the environment or ProxyConfig.proxyMetadata. */
async function maybeStartDns(settings: AgentSettings): Promise<AgentDns | undefined> {
  const env = { ...process.env, ...(settings.proxyConfig.proxyMetadata ?? {}) } as Record<string, string | undefined>;
  if (parseGoBool(env.ISTIO_META_DNS_CAPTURE ?? 'false') !== true) return undefined;
  return startAgentDns({
    address: env.DNS_PROXY_ADDR || 'localhost:15053', proxyNamespace: settings.identity.podNamespace, proxyDomain: settings.identity.domain,
  });
}

export async function runPilotWait(argv: readonly string[]): Promise<number> {
  let args;
  try { args = parsePilotWaitArgs(argv); } catch (err) { return usageExit(err, PILOT_WAIT_HELP); }
  process.stdout.write(`Waiting for Envoy proxy to be ready (timeout: ${args.timeoutSeconds} seconds)...\n`);
  const deadline = Date.now() + args.timeoutSeconds * 1000;
  let last = 'no attempt';
  while (Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, args.periodMillis));
    try {
      const res = await fetch(args.url, { signal: AbortSignal.timeout(args.requestTimeoutMillis) });
      await res.arrayBuffer();
      if (res.status === 200) { process.stdout.write('Envoy is ready!\n'); return 0; }
      last = `HTTP status code ${res.status}`;
    } catch (err) {
      last = (err as Error).message;
    }
  }
  process.stderr.write(`Error: timeout waiting for Envoy proxy to become ready. Last error: ${last}\n`);
  return 1;
}
