/**
 * The serving part of skua-controlplane: sources (Istio YAML, resource files, the mesh file) into one
 * snapshot, ADS/WDS on the xDS address, the CA on its own address, all stopped on SIGTERM/SIGINT.
 * With no source, only the CA runs (a CA process apart from the one serving xDS).
 */
import { logger } from '@skua/proxy/core';
import { CertificateAuthority } from './ca/authority.ts';
import { startCaServer } from './ca/server.ts';
import { TokenAuthority } from './ca/token.ts';
import { Snapshot } from './ads/snapshot.ts';
import { AdsServer } from './ads/server.ts';
import type { ResourceGroup } from './ads/resources.ts';
import { FileSource } from './files.ts';
import { MeshSource } from './mesh/source.ts';
import { IstioSource } from './istio/source.ts';

const log = logger('main');

export interface ServeOptions {
  readonly dir?: string;
  readonly meshFile?: string;
  readonly istioDir?: string;
  readonly xdsAddress: string;
  readonly caAddress?: string;
  readonly stateDir?: string;
  readonly cacerts?: string;
  readonly trustDomain: string;
  /** Service accounts (namespace/name) allowed to request certificates for other identities (ztunnel). */
  readonly trustedNodeAccounts?: readonly string[];
}

export async function startServing(o: ServeOptions): Promise<void> {
  const line = (text: string): void => log.info(text);
  const snapshot = new Snapshot();
  const files = o.dir ? new FileSource(o.dir) : undefined;
  const mesh = o.meshFile ? new MeshSource(o.meshFile) : undefined;
  const istio = o.istioDir ? new IstioSource(o.istioDir) : undefined;
  let fileGroups: ResourceGroup[] = [];
  let meshGroups: ResourceGroup[] = [];
  let istioGroups: ResourceGroup[] = [];
  let istioReported = '';
  const report = (problems: readonly { file: string; message: string }[]): void => {
    for (const p of problems) log.warn(`config: ${p.file}: ${p.message} (its last good content keeps serving)`);
  };
  // Translated groups come last: a translated resource wins over a same-named one from the directory.
  const publish = (): void => { snapshot.set([...fileGroups, ...istioGroups, ...meshGroups]); };
  /** Logs the Istio problems when they changed (each edit re-reports what is still wrong). */
  const reportIstio = (): void => {
    const lines = istio!.report();
    const text = lines.join('\n');
    if (text === istioReported) return;
    istioReported = text;
    for (const l of lines) log.warn(`istio: ${l}`);
  };
  if (files) { fileGroups = files.scan(); report(files.problems); }
  if (mesh) { meshGroups = mesh.load(); if (mesh.problem) report([{ file: o.meshFile!, message: mesh.problem }]); }
  if (istio) { istioGroups = istio.load(); reportIstio(); }
  publish();
  istio?.watch((groups) => {
    istioGroups = groups;
    reportIstio();
    publish();
    line(`config: istio ${o.istioDir!} ${istio.failure ? 'kept' : 'applied'}, ${snapshot.resourceCount} resources`);
  });
  files?.watch((groups, problems) => { report(problems); fileGroups = groups; publish(); line(`config: ${snapshot.resourceCount} resources`); });
  mesh?.watch((groups, problem) => {
    if (problem) report([{ file: o.meshFile!, message: problem }]);
    meshGroups = groups;
    publish();
    line(`config: mesh ${o.meshFile!} ${problem ? 'kept' : 'applied'}, ${snapshot.resourceCount} resources`);
  });
  const closeSources = (): void => { files?.close(); mesh?.close(); istio?.close(); };
  const server = files || mesh || istio ? new AdsServer(snapshot, line) : undefined;
  if (server) {
    let port: number;
    try {
      port = await server.listen(o.xdsAddress);
    } catch (err) {
      closeSources();
      throw err;
    }
    const sources = [o.istioDir ? `istio ${o.istioDir}` : '', o.dir ? `from ${o.dir}` : '', o.meshFile ? `mesh ${o.meshFile}` : ''].filter(Boolean).join(', ');
    line(`skua-controlplane: ADS on ${o.xdsAddress.replace(/:\d+$/, '')}:${port}, ${snapshot.resourceCount} resources ${sources}`);
  }
  let closeCa = async (): Promise<void> => {};
  if (o.caAddress) {
    try {
      const ca = await CertificateAuthority.create({ trustDomain: o.trustDomain, stateDir: o.stateDir, cacertsDir: o.cacerts });
      // istiod's ISTIOD_CUSTOM_HOST: more names for the serving certificate (compose reaches it as `istiod`).
      const custom = (process.env.ISTIOD_CUSTOM_HOST ?? '').split(',').map((h) => h.trim()).filter(Boolean);
      const caServer = await startCaServer({ ca, tokens: TokenAuthority.create(o.stateDir), listen: o.caAddress, trustedNodeAccounts: o.trustedNodeAccounts, dnsNames: ['localhost', 'istiod.istio-system.svc', ...custom] });
      closeCa = () => caServer.close();
      line(`skua-controlplane: CA for ${ca.trustDomain} on ${o.caAddress.replace(/:\d+$/, '')}:${caServer.port}${o.stateDir ? `, state in ${o.stateDir}` : ' (keys in memory: no --state-dir)'}`);
    } catch (err) {
      closeSources();
      await server?.close();
      throw err;
    }
  }
  const stop = (): void => { closeSources(); void Promise.all([server?.close(), closeCa()]).then(() => process.exit(0)); };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
