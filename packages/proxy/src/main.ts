import { HELP, parseProxyArgs, UsageError, USAGE } from './agent/cli.ts';
import { runPilotProxy, runPilotWait } from './agent/commands.ts';
import { compileBootstrap, loadBootstrapSource, type BootstrapConfig } from './config/bootstrap.ts';
import { applyLogFlags, log } from './core/log.ts';
import { explainError } from './core/explain-error.ts';
import { trimNativeHeapPeriodically } from './core/native-heap-trim.ts';
import { collectStartUpGarbage } from './core/startup-heap.ts';
import { ProxyServer, VERSION } from './server.ts';
import { startWorkers } from './workers.ts';

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
    if (!(err instanceof UsageError)) throw err;
    if (!err.message) { process.stdout.write(`${HELP}\n`); return 0; } // --help
    process.stderr.write(`PARSE ERROR: ${err.message}\n${USAGE}\n(skua-proxy --help lists every flag)\n`);
    return 1;
  }
  if (!args.configPath && !args.configYaml) {
    process.stderr.write(`error: no configuration: give a bootstrap with -c FILE or --config-yaml YAML\n${USAGE}\n(skua-proxy --help lists every flag)\n`);
    return 1;
  }
  const logError = applyLogFlags(args);
  if (logError) { process.stderr.write(`${logError}\n`); return 1; }
  let bootstrap: BootstrapConfig;
  try {
    bootstrap = compileBootstrap(loadBootstrapSource(args.configPath || undefined, args.configYaml || undefined),
      { unknownFields: args.allowUnknownStaticFields ? 'warn' : 'reject' });
  } catch (err) {
    const where = args.configPath || '--config-yaml';
    process.stderr.write(`error initializing configuration '${where}': ${explainError(err)}\n`);
    return 1;
  }
  if (args.mode === 'validate') {
    process.stdout.write(`configuration '${args.configPath || '--config-yaml'}' OK\n`);
    return 0;
  }
  log.info(`skua-proxy ${VERSION} starting: config ${args.configPath || '--config-yaml'}, concurrency ${args.concurrency}, node ${bootstrap.node.id || '(no id)'}`);
  // istio-agent's part: the workload certificate (CA_ADDR / FILE_MOUNTED_CERTS) before listeners open.
  // Loaded only when asked for: the CA client (grpc-js) and X.509 code cost start-up time otherwise.
  try {
    if (process.env.CA_ADDR || process.env.FILE_MOUNTED_CERTS) await (await import('./tls/identity.ts')).startIdentityFromEnv(process.env);
  } catch (err) {
    process.stderr.write(`error: workload certificate: ${explainError(err)}\n`);
    return 1;
  }
  const options = { ...args, reusePort: args.concurrency > 1, admin: true };
  const server = new ProxyServer(bootstrap, options);
  try {
    if (args.concurrency > 1) await startWorkers(server, args);
    else await server.start();
  } catch (err) {
    process.stderr.write(`error: ${explainError(err)}\n`);
    if (log.debugOn) process.stderr.write(`${(err as Error).stack}\n`);
    return 1;
  }
  if (args.mode === 'init_only') await server.shutdown(0);
  // SIGTERM drains (listeners closed, requests in flight finish, bounded by --drain-time-s); a second
  // SIGTERM, or SIGINT, stops at once.
  const stop = (): void => { log.info('caught signal, shutting down'); void server.shutdown(0); };
  process.once('SIGTERM', () => { log.info('caught SIGTERM, draining'); void server.drainAndExit(); process.once('SIGTERM', stop); });
  process.once('SIGINT', stop);
  collectStartUpGarbage();
  trimNativeHeapPeriodically();
  return -1;
}

main(process.argv.slice(2)).then((code) => { if (code >= 0) process.exit(code); }, (err: Error) => {
  // Not expected: still one line, with the stack only for -l debug/trace.
  process.stderr.write(`skua-proxy: ${explainError(err)}\n`);
  if (log.debugOn || !(err instanceof Error)) process.stderr.write(`${err?.stack ?? ''}\n`);
  else process.stderr.write('(run with -l debug for the stack trace)\n');
  process.exit(1);
});
