/**
 * skua-ztunnel [proxy | version | help | cni-standin | cni-plugin]: the per-node L4 proxy of Istio's ambient mode,
 * configured by ztunnel's environment variables (see config.ts, help.ts). SIGTERM/SIGINT drain
 * gracefully: listeners stop, open connections get CONNECTION_TERMINATION_DEADLINE, then exit 0.
 */
import { log, setLogLevel } from './core.ts';
import { ConfigEnvError, loadConfig } from './config.ts';
import { HELP, VERSION } from './help.ts';

const isHelp = (a: string | undefined): boolean => a === '-h' || a === '--help' || a === 'help';

async function proxy(): Promise<void> {
  const { ZtunnelApp } = await import('./app.ts');
  if (process.env.RUST_LOG) setLogLevel(process.env.RUST_LOG.split(',')[0]);
  let app: InstanceType<typeof ZtunnelApp>;
  try {
    app = new ZtunnelApp({ cfg: loadConfig() });
    await app.start();
  } catch (e) {
    process.stderr.write(`skua-ztunnel: ${(e as Error).message}\n`);
    process.exit(e instanceof ConfigEnvError ? 2 : 1);
  }
  log.info(`${VERSION} started (${app.cfg.proxyMode} mode)`);
  let stopping = false;
  const stop = (sig: string): void => {
    if (stopping) return;
    stopping = true;
    log.info(`${sig}: draining (deadline ${app.cfg.terminationDeadlineMs} ms)`);
    void app.drain().then(() => process.exit(0));
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

async function cniCommand(cmd: 'cni-standin' | 'cni-plugin', args: readonly string[]): Promise<void> {
  const { CniUsageError, runCniPlugin, runCniStandIn } = await import('./cni/cli.ts');
  try {
    process.exit(await (cmd === 'cni-plugin' ? runCniPlugin(args) : runCniStandIn(args)));
  } catch (e) {
    process.stderr.write(`skua-ztunnel ${cmd}: ${(e as Error).message}\n`);
    process.exit(e instanceof CniUsageError ? 2 : 1);
  }
}

async function main(argv: readonly string[]): Promise<void> {
  const [cmd, ...rest] = argv;
  if (cmd === 'version') { process.stdout.write(`${VERSION}\n`); return; }
  if (isHelp(cmd) || ((cmd === undefined || cmd === 'proxy') && rest.some(isHelp))) { process.stdout.write(HELP); return; }
  if (cmd === 'cni-standin' || cmd === 'cni-plugin') return cniCommand(cmd, rest);
  if (cmd !== undefined && cmd !== 'proxy') { process.stderr.write(`skua-ztunnel: unknown command ${JSON.stringify(cmd)}\n${HELP}`); process.exit(2); }
  // Further arguments are ignored, as ztunnel does (its DaemonSet runs `ztunnel proxy ztunnel`).
  return proxy();
}

void main(process.argv.slice(2));
