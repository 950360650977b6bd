/**
 * The local CA on its own (the control plane's main wires the same parts):
 *   node cli.ts serve --state-dir D [--cacerts DIR] [--listen 127.0.0.1:15012] [--trust-domain cluster.local]
 *                     [--default-ttl 24h] [--max-ttl 2160h]
 *   node cli.ts token --state-dir D --namespace NS --service-account SA [--ttl 1h]
 * `token` prints a credential the CA accepts as `authorization: Bearer` (write it to
 * the proxy's ./var/run/secrets/tokens/istio-token).
 */
import { parseArgs } from 'node:util';
import { parseGoDuration } from '@skua/proxy/identity';
import { CertificateAuthority } from './authority.ts';
import { startCaServer } from './server.ts';
import { TokenAuthority } from './token.ts';

export async function runCaCli(argv: readonly string[]): Promise<number> {
  const [command, ...rest] = argv;
  const { values } = parseArgs({
    args: [...rest], strict: true,
    options: {
      'state-dir': { type: 'string' }, cacerts: { type: 'string' }, listen: { type: 'string', default: '127.0.0.1:15012' },
      'trust-domain': { type: 'string', default: 'cluster.local' }, 'default-ttl': { type: 'string' }, 'max-ttl': { type: 'string' },
      namespace: { type: 'string' }, 'service-account': { type: 'string' }, ttl: { type: 'string', default: '1h' },
    },
  });
  const stateDir = values['state-dir'];
  if (command === 'token') {
    if (!values.namespace || !values['service-account']) throw new Error('token: --namespace and --service-account are required');
    const tokens = TokenAuthority.create(stateDir);
    process.stdout.write(tokens.issue({ namespace: values.namespace, serviceAccount: values['service-account'] }, parseGoDuration(values.ttl, '--ttl')) + '\n');
    return 0;
  }
  if (command !== 'serve') throw new Error('usage: cli.ts serve|token [options]');
  const ca = await CertificateAuthority.create({
    trustDomain: values['trust-domain'], stateDir, cacertsDir: values.cacerts,
    defaultTtlSec: values['default-ttl'] ? parseGoDuration(values['default-ttl'], '--default-ttl') : undefined,
    maxTtlSec: values['max-ttl'] ? parseGoDuration(values['max-ttl'], '--max-ttl') : undefined,
  });
  const server = await startCaServer({ ca, tokens: TokenAuthority.create(stateDir), listen: values.listen });
  process.stdout.write(`skua CA for ${ca.trustDomain} listening on port ${server.port}\n`);
  const stop = (): void => { void server.close().then(() => process.exit(0)); };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
  return -1;
}

if (import.meta.main) {
  runCaCli(process.argv.slice(2)).then((code) => { if (code >= 0) process.exit(code); }, (err: Error) => {
    process.stderr.write(`skua CA: ${err.message}\n`);
    process.exit(1);
  });
}
