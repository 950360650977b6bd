/**
 * skua-controlplane: serves xDS (SotW and Delta ADS) and WDS (Delta) from Istio YAML (`--istio DIR`),
 * a directory of resource files and/or a compact mesh description, pushing what changed when the
 * files change, and optionally the CA (istiod's IstioCertificateService, TLS) for workload certificates.
 *   skua-controlplane [--istio DIR] [--config-dir DIR] [--mesh FILE] [--xds-address 127.0.0.1:15010]
 *                     [--ca-address 127.0.0.1:15012 --state-dir DIR [--cacerts DIR] [--trust-domain cluster.local]]
 *   skua-controlplane validate FILE|DIR...
 *   skua-controlplane apply|delete --istio DIR [-n NS] FILE...   (kubectl apply/delete into the watched directory)
 *   skua-controlplane token --state-dir DIR --namespace NS --service-account SA [--ttl 1h]
 */
import { parseArgs } from 'node:util';
import { runCaCli } from './ca/cli.ts';
import { CertificateAuthority } from './ca/authority.ts';
import { startCaServer } from './ca/server.ts';
import { TokenAuthority } from './ca/token.ts';
import { Snapshot } from './ads/snapshot.ts';
import { AdsServer } from './ads/server.ts';
import type { ResourceGroup } from './ads/resources.ts';
import { FileSource } from './files.ts';
import { MeshSource } from './mesh/source.ts';
import { IstioSource } from './istio/source.ts';
import { runValidate } from './istio/validate-cli.ts';
import { runApply } from './istio/apply.ts';

if (process.argv[2] === 'token') process.exit(await runCaCli(process.argv.slice(2)));
if (process.argv[2] === 'validate') { process.exitCode = runValidate(process.argv.slice(3)); process.exit(); }
if (process.argv[2] === 'apply' || process.argv[2] === 'delete') process.exit(runApply(process.argv[2], process.argv.slice(3)));
const { values } = parseArgs({
  options: {
    'config-dir': { type: 'string' },
    mesh: { type: 'string' },
    istio: { type: 'string' },
    'xds-address': { type: 'string', default: '127.0.0.1:15010' },
    'ca-address': { type: 'string' },
    'state-dir': { type: 'string' },
    cacerts: { type: 'string' },
    'trust-domain': { type: 'string', default: 'cluster.local' },
    // istiod's CA_TRUSTED_NODE_ACCOUNTS: who may ask for workloads' certificates (ztunnel).
    'ca-trusted-node-accounts': { type: 'string', default: 'istio-system/ztunnel' },
  },
});
const dir = values['config-dir'];
const meshFile = values.mesh;
const istioDir = values.istio;
if (!dir && !meshFile && !istioDir) {
  process.stderr.write('usage: skua-controlplane [--istio DIR] [--config-dir DIR] [--mesh FILE] [--xds-address HOST:PORT] [--ca-address HOST:PORT --state-dir DIR]\n'
    + '       skua-controlplane validate FILE|DIR...\n       skua-controlplane apply|delete --istio DIR [-n NS] FILE...\n       skua-controlplane token --state-dir DIR --namespace NS --service-account SA\n');
  process.exit(2);
}
const log = (line: string): void => { process.stderr.write(`${new Date().toISOString()} ${line}\n`); };
const snapshot = new Snapshot();
const files = dir ? new FileSource(dir) : undefined;
const mesh = meshFile ? new MeshSource(meshFile) : undefined;
const istio = istioDir ? new IstioSource(istioDir) : undefined;
let fileGroups: ResourceGroup[] = [];
let meshGroups: ResourceGroup[] = [];
let istioGroups: ResourceGroup[] = [];
let istioReported = '';
const report = (problems: readonly { file: string; message: string }[]): void => {
  for (const p of problems) log(`config: ${p.file}: ${p.message} (its last good content keeps serving)`);
};
// Translated groups come last: a translated resource wins over a same-named one from the directory.
const publish = (): void => { snapshot.set([...fileGroups, ...istioGroups, ...meshGroups]); };
/** Logs the Istio problems when they changed (each edit re-reports what is still wrong). */
const reportIstio = (): void => {
  const lines = istio!.report();
  const text = lines.join('\n');
  if (text === istioReported) return;
  istioReported = text;
  for (const l of lines) log(`istio: ${l}`);
};
if (files) { fileGroups = files.scan(); report(files.problems); }
if (mesh) { meshGroups = mesh.load(); if (mesh.problem) report([{ file: meshFile!, message: mesh.problem }]); }
if (istio) { istioGroups = istio.load(); reportIstio(); }
publish();
istio?.watch((groups) => {
  istioGroups = groups;
  reportIstio();
  publish();
  log(`config: istio ${istioDir!} ${istio.failure ? 'kept' : 'applied'}, ${snapshot.resourceCount} resources`);
});
files?.watch((groups, problems) => { report(problems); fileGroups = groups; publish(); log(`config: ${snapshot.resourceCount} resources`); });
mesh?.watch((groups, problem) => {
  if (problem) report([{ file: meshFile!, message: problem }]);
  meshGroups = groups;
  publish();
  log(`config: mesh ${meshFile!} ${problem ? 'kept' : 'applied'}, ${snapshot.resourceCount} resources`);
});
const server = new AdsServer(snapshot, log);
const port = await server.listen(values['xds-address']!);
const sources = [istioDir ? `istio ${istioDir}` : '', dir ? `from ${dir}` : '', meshFile ? `mesh ${meshFile}` : ''].filter(Boolean).join(', ');
log(`skua-controlplane: ADS on ${values['xds-address']!.replace(/:\d+$/, '')}:${port}, ${snapshot.resourceCount} resources ${sources}`);
let closeCa = async (): Promise<void> => {};
if (values['ca-address']) {
  const ca = await CertificateAuthority.create({ trustDomain: values['trust-domain'], stateDir: values['state-dir'], cacertsDir: values.cacerts });
  const caServer = await startCaServer({
    ca, tokens: TokenAuthority.create(values['state-dir']), listen: values['ca-address'],
    trustedNodeAccounts: values['ca-trusted-node-accounts'].split(',').filter(Boolean),
  });
  closeCa = () => caServer.close();
  log(`skua-controlplane: CA for ${ca.trustDomain} on ${values['ca-address'].replace(/:\d+$/, '')}:${caServer.port}`);
}
const stop = (): void => { files?.close(); mesh?.close(); istio?.close(); void Promise.all([server.close(), closeCa()]).then(() => process.exit(0)); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
