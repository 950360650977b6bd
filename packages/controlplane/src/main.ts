/**
 * skua-controlplane: serves xDS (SotW and Delta ADS) from a directory of resource files,
 * pushing what changed when the files change.
 *   skua-controlplane --config-dir DIR [--xds-address 127.0.0.1:15010]
 */
import { parseArgs } from 'node:util';
import { Snapshot } from './ads/snapshot.ts';
import { AdsServer } from './ads/server.ts';
import { FileSource } from './files.ts';

const { values } = parseArgs({
  options: {
    'config-dir': { type: 'string' },
    'xds-address': { type: 'string', default: '127.0.0.1:15010' },
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
const stop = (): void => { files.close(); void server.close().then(() => process.exit(0)); };
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
