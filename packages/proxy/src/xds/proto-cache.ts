/**
 * The xDS proto Root, parsed once per installation: protobufjs's JSON form of the Root that
 * protos.ts builds from ~1,000 .proto files, kept beside Node's compile cache (the bin enables it;
 * the image fills it at build time with bin/warm-compile-cache.js). Parsing the files was ~300 ms
 * of every ADS proxy's start-up (its biggest single cost applying a mesh, issue 13); reading
 * the JSON back is about half that. Without a compile cache (src/main.ts run directly, tests)
 * nothing is read or written.
 *
 * The file's name carries a hash of everything the Root is made from: protobufjs's and
 * @grpc/grpc-js-xds's versions (the format, and the Envoy protos shipped in the latter's deps/), and
 * Skua's own .proto files, so a changed input never reads an old Root. A file that cannot be read
 * or parsed is ignored (parsed anew and written again); one that cannot be written is skipped.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire, getCompileCacheDir } from 'node:module';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import type { Root } from 'protobufjs';

const require = createRequire(import.meta.url);
/** Bumped when what is cached, or how it is read, changes. */
const FORMAT = 1;

function versionOf(pkg: string): string {
  return (JSON.parse(readFileSync(require.resolve(`${pkg}/package.json`), 'utf8')) as { version: string }).version;
}

/** Where the Root built from these inputs is kept; undefined without a compile cache. */
export function cachedRootFile(ownDir: string, ownFiles: readonly string[], trees: unknown): string | undefined {
  const dir = getCompileCacheDir();
  if (!dir) return undefined;
  const h = createHash('sha256').update(JSON.stringify([FORMAT, versionOf('protobufjs'), versionOf('@grpc/grpc-js-xds'), trees]));
  for (const f of ownFiles) h.update(f).update(readFileSync(join(ownDir, f)));
  return join(dir, `skua-xds-root-${h.digest('hex').slice(0, 32)}.json`);
}

/** The cached Root, resolved, or undefined when there is none (or it cannot be read). */
export function readCachedRoot(file: string): Root | undefined {
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch { return undefined; }
  try {
    const root = protobuf.Root.fromJSON(JSON.parse(text) as protobuf.INamespace);
    root.resolveAll();
    return root;
  } catch {
    return undefined;
  }
}

/** Keeps `root` for the next start (atomically: a concurrent reader sees all of it or nothing). */
export function writeCachedRoot(file: string, root: Root): void {
  try {
    mkdirSync(join(file, '..'), { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(root.toJSON({ keepComments: false })));
    renameSync(tmp, file);
  } catch { /* a read-only cache directory: parse again next time */ }
}
