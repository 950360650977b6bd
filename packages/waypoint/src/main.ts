/**
 * skua-waypoint: the waypoint of Istio's ambient mode, as Istio's waypoint pod runs istio-proxy
 * (`pilot-agent proxy waypoint ...`): the same arguments, environment and ports, in one process
 * over @skua/proxy's pilot-agent mode. The waypoint's behaviour is all in the xDS it gets
 * (istiod's, or skua-controlplane's): connect_terminate on 15008, main_internal, connect_originate.
 */
import { HELP, pilotArgs, VERSION } from './cli.ts';

async function main(argv: readonly string[]): Promise<number> {
  if (argv.some((a) => a === '--help' || a === '-h') || argv[0] === 'help') { process.stdout.write(`${HELP}\n`); return 0; }
  if (argv[0] === 'version' || argv[0] === '--version') { process.stdout.write(`${VERSION}\n`); return 0; }
  let args: string[];
  try { args = pilotArgs(argv); } catch (err) { process.stderr.write(`Error: ${(err as Error).message}\n${HELP.split('\n', 2).join('\n')}\n`); return 2; }
  const { runPilotProxy } = await import('@skua/proxy/envoy');
  return runPilotProxy(args);
}

const code = await main(process.argv.slice(2));
// -1: the proxy runs until a signal ends it.
if (code >= 0) process.exit(code);
