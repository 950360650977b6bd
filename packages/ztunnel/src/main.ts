/**
 * skua-ztunnel [proxy | version | help]: the per-node L4 proxy of Istio's ambient mode, configured
 * by ztunnel's environment variables (see config.ts). SIGTERM/SIGINT drain gracefully.
 */
import { log, setLogLevel } from './core.ts';
import { ConfigEnvError, loadConfig } from './config.ts';
import { ZtunnelApp } from './app.ts';

const VERSION = 'skua-ztunnel 0.1.0';
const HELP = `${VERSION}
Commands:
proxy (default) - Start the ztunnel proxy
version         - Print the version of ztunnel
help            - Print commands and version of ztunnel
`;

async function main(): Promise<void> {
  const cmd = process.argv[2];
  if (cmd === 'version') { process.stdout.write(`${VERSION}\n`); return; }
  if (cmd === 'help' || cmd === '--help') { process.stdout.write(HELP); return; }
  if (cmd !== undefined && cmd !== 'proxy') { process.stderr.write(`unknown command ${JSON.stringify(cmd)}\n${HELP}`); process.exit(2); }
  if (process.env.RUST_LOG) setLogLevel(process.env.RUST_LOG.split(',')[0]);
  let app: ZtunnelApp;
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

void main();
