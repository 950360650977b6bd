import { parseProxyArgs, UsageError, USAGE } from './agent/cli.ts';
import { compileBootstrap, loadBootstrapSource, type BootstrapConfig } from './config/bootstrap.ts';
import { setLogLevel, log } from './core/log.ts';
import { ProxyServer, VERSION } from './server.ts';
import { startWorkers } from './workers.ts';
import { runPilotProxy, runPilotWait } from './agent/run-agent.ts';

/** skua-proxy: pilot-agent's `proxy` / `wait` commands, istio-init's `istio-iptables`, or Envoy's command line over a bootstrap. */
async function main(argv: string[]): Promise<number> {
  if (argv[0] === 'proxy') return runPilotProxy(argv.slice(1));
  if (argv[0] === 'wait') return runPilotWait(argv.slice(1));
  if (argv[0] === 'istio-iptables' || argv[0] === 'istio-clean-iptables') {
    const { runIstioIptables } = await import('./agent/iptables/command.ts');
    const io = { env: process.env, out: (s: string) => process.stdout.write(s), err: (s: string) => process.stderr.write(s) };
    return runIstioIptables(argv.slice(1), io, argv[0] === 'istio-clean-iptables');
  }
  if (argv.includes('--version')) { process.stdout.write(`skua-proxy version: ${VERSION}\n`); return 0; }
  let args;
  try {
    args = parseProxyArgs(argv);
  } catch (err) {
    if (err instanceof UsageError) {
      if (!err.message) { process.stdout.write(`${USAGE}\n`); return 0; } // --help
      process.stderr.write(`PARSE ERROR: ${err.message}\n${USAGE}\n`);
      return 1;
    }
    throw err;
  }
  if (!setLogLevel(args.logLevel)) { process.stderr.write(`error: unknown log level ${args.logLevel}\n${USAGE}\n`); return 1; }
  let bootstrap: BootstrapConfig;
  try {
    bootstrap = compileBootstrap(loadBootstrapSource(args.configPath || undefined, args.configYaml || undefined),
      { unknownFields: args.allowUnknownStaticFields ? 'warn' : 'reject' });
  } catch (err) {
    const where = args.configPath || '--config-yaml';
    process.stderr.write(`error initializing configuration '${where}': ${(err as Error).message}\n`);
    return 1;
  }
  if (args.mode === 'validate') {
    process.stdout.write(`configuration '${args.configPath || '--config-yaml'}' OK\n`);
    return 0;
  }
  // istio-agent's part: the workload certificate (CA_ADDR / FILE_MOUNTED_CERTS) before listeners open.
  // Loaded only when asked for: the CA client (grpc-js) and X.509 code cost start-up time otherwise.
  try {
    if (process.env.CA_ADDR || process.env.FILE_MOUNTED_CERTS) await (await import('./tls/identity.ts')).startIdentityFromEnv(process.env);
  } catch (err) {
    process.stderr.write(`error: ${(err as Error).message}\n`);
    return 1;
  }
  const options = { ...args, reusePort: args.concurrency > 1, admin: true };
  const server = new ProxyServer(bootstrap, options);
  if (args.concurrency > 1) await startWorkers(server, args);
  else await server.start();
  if (args.mode === 'init_only') await server.shutdown(0);
  // SIGTERM drains (listeners closed, requests in flight finish, bounded by --drain-time-s); a second
  // SIGTERM, or SIGINT, stops at once.
  const stop = (): void => { log.info('caught signal, shutting down'); void server.shutdown(0); };
  process.once('SIGTERM', () => { log.info('caught SIGTERM, draining'); void server.drainAndExit(); process.once('SIGTERM', stop); });
  process.once('SIGINT', stop);
  return -1;
}

main(process.argv.slice(2)).then((code) => { if (code >= 0) process.exit(code); }, (err: Error) => {
  process.stderr.write(`skua-proxy: ${err.stack ?? err.message}\n`);
  process.exit(1);
});
