/**
 * skua-controlplane: serves xDS (SotW and Delta ADS) from a directory of resource files,
 * pushing what changed when the files change, and optionally the CA (istiod's
 * IstioCertificateService, TLS) for the proxies' workload certificates.
 *   skua-controlplane --config-dir DIR [--xds-address 127.0.0.1:15010]
 *                     [--ca-address 127.0.0.1:15012 --state-dir DIR [--cacerts DIR] [--trust-domain cluster.local]]
 *   skua-controlplane token --state-dir DIR --namespace NS --service-account SA [--ttl 1h]
 */
import { parseArgs } from 'node:util';
import { runCaCli } from './ca/cli.ts';
import { CertificateAuthority } from './ca/authority.ts';
import { startCaServer } from './ca/server.ts';
import { TokenAuthority } from './ca/token.ts';
import { Snapshot } from './ads/snapshot.ts';
import { AdsServer } from './ads/server.ts';
import { FileSource } from './files.ts';

if (process.argv[2] === 'token') process.exit(await runCaCli(process.argv.slice(2)));
const { values } = parseArgs({
  options: {
    'config-dir': { type: 'string' },
    'xds-address': { type: 'string', default: '127.0.0.1:15010' },
    'ca-address': { type: 'string' },
    'state-dir': { type: 'string' },
    cacerts: { type: 'string' },
    'trust-domain': { type: 'string', default: 'cluster.local' },
  },
});
const dir = values['config-dir'];
if (!dir) {
  process.stderr.write('usage: skua-controlplane --config-dir DIR [--xds-address HOST:PORT]\n');
  process.exit(2);
}
const log = (line: string): void => { process.stderr.write(`${new Date().toISOString()} ${line}\n`); };
const snapshot = new Snapshot();
const files = new FileSource(dir);
const report = (problems: readonly { file: string; message: string }[]): void => {
  for (const p of problems) log(`config: ${p.file}: ${p.message} (its last good content keeps serving)`);
};
snapshot.set(files.scan());
report(files.problems);
files.watch((groups, problems) => { report(problems); snapshot.set(groups); log(`config: ${snapshot.resourceCount} resources`); });
const server = new AdsServer(snapshot, log);
const port = await server.listen(values['xds-address']!);
log(`skua-controlplane: ADS on ${values['xds-address']!.replace(/:\d+$/, '')}:${port}, ${snapshot.resourceCount} resources from ${dir}`);
let closeCa = async (): Promise<void> => {};
if (values['ca-address']) {
  const ca = await CertificateAuthority.create({ trustDomain: values['trust-domain'], stateDir: values['state-dir'], cacertsDir: values.cacerts });
  const caServer = await startCaServer({ ca, tokens: TokenAuthority.create(values['state-dir']), listen: values['ca-address'] });
  closeCa = () => caServer.close();
  log(`skua-controlplane: CA for ${ca.trustDomain} on ${values['ca-address'].replace(/:\d+$/, '')}:${caServer.port}`);
}
const stop = (): void => { files.close(); void Promise.all([server.close(), closeCa()]).then(() => process.exit(0)); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
