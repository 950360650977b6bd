/**
 * Where the .proto files are (Envoy's and xDS's under @grpc/grpc-js-xds's deps/, Skua's Istio ones),
 * apart from protos.ts: a static bootstrap's field check reads them by name (config/proto-schema.ts)
 * without loading protobufjs (issue 13).
 */
import { existsSync, readdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const require = createRequire(import.meta.url);

function depsDir(): string {
  // The package has no "exports" map, so its main file resolves; deps/ sits at the package root.
  const main = require.resolve('@grpc/grpc-js-xds');
  let dir = dirname(main);
  while (!existsSync(join(dir, 'deps', 'envoy-api'))) {
    const up = dirname(dir);
    if (up === dir) throw new Error('@grpc/grpc-js-xds: deps/envoy-api not found');
    dir = up;
  }
  return join(dir, 'deps');
}

export function protoFiles(root: string, rel: string, out: string[]): void {
  const dir = join(root, rel);
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const r = `${rel}/${e.name}`;
    if (e.isDirectory()) protoFiles(root, r, out);
    else if (e.name.endsWith('.proto')) out.push(r);
  }
}

export interface ProtoDirs {
  readonly deps: string;
  readonly ownDir: string;
  /** Import roots, in resolution order. */
  readonly includes: readonly string[];
  /** Include roots whose package directories load on demand (Envoy's, xDS's). */
  readonly lazyRoots: readonly string[];
  readonly ownFiles: readonly string[];
}

let dirs: ProtoDirs | undefined;

/**
 * Where the .proto files are: Envoy's and xDS's (deps/), Skua's Istio ones, and the import roots.
 * Found once: an ADS proxy asks twice (the bootstrap's field check, then the xDS decoders).
 */
export function protoDirs(): ProtoDirs {
  return (dirs ??= findProtoDirs());
}

function findProtoDirs(): ProtoDirs {
  const deps = depsDir();
  const ownDir = join(dirname(fileURLToPath(import.meta.url)), 'proto');
  const pbjsDir = dirname(require.resolve('protobufjs/package.json'));
  const includes = [
    join(deps, 'envoy-api'), join(deps, 'xds'), join(deps, 'googleapis'),
    join(deps, 'protoc-gen-validate'), ownDir, pbjsDir,
  ];
  const ownFiles: string[] = [];
  protoFiles(ownDir, 'istio', ownFiles);
  return { deps, ownDir, includes, lazyRoots: [join(deps, 'envoy-api'), join(deps, 'xds')], ownFiles };
}

/**
 * The .proto files (relative to their include root) of each package directory `fullName` may be
 * in, longest first: in Envoy's API tree packages are directories, so a type's files are found
 * without an index. A directory is offered once per `tried` set, and only where `allowed` says.
 * Callers stop at the first batch that defines the name.
 */
export function* packageFiles(fullName: string, roots: readonly string[], tried: Set<string>, allowed: (rel: string) => boolean = () => true): Generator<string[]> {
  const parts = fullName.split('.');
  for (let n = parts.length - 1; n > 0; n--) {
    const rel = parts.slice(0, n).join('/');
    if (tried.has(rel) || !allowed(rel)) continue;
    tried.add(rel);
    for (const root of roots) {
      const dir = join(root, rel);
      if (existsSync(dir)) yield readdirSync(dir).filter((f) => f.endsWith('.proto')).sort().map((f) => `${rel}/${f}`);
    }
  }
}
