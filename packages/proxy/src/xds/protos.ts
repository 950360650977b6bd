/**
 * Loads Envoy's data-plane-api .proto files (shipped inside @grpc/grpc-js-xds
 * under deps/, with the xds/udpa, validate and googleapis protos they import)
 * plus Skua's own declarations of Istio's filter configs into one protobufjs
 * Root, once, on first use.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import protobuf from 'protobufjs';
import type { Enum, Root, Type } from 'protobufjs';
import { cachedRootFile, readCachedRoot, writeCachedRoot } from './proto-cache.ts';

const require = createRequire(import.meta.url);

/** Directories whose .proto files are all loaded (relative to the include root they live in). */
const LOADED_TREES: ReadonlyArray<readonly [string, string]> = [
  ['envoy-api', 'envoy/config'],
  ['envoy-api', 'envoy/extensions'],
  ['envoy-api', 'envoy/type'],
  ['envoy-api', 'envoy/service/discovery'],
  ['envoy-api', 'envoy/admin/v3'],
  // ext_authz's Check service (CheckRequest/CheckResponse): two files, ~2-10 ms more on a ~0.6-1.3 s load.
  ['envoy-api', 'envoy/service/auth/v3'],
  ['xds', 'udpa/type'],
  ['xds', 'xds/type'],
];

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

function protoFiles(root: string, rel: string, out: string[]): void {
  const dir = join(root, rel);
  if (!existsSync(dir)) return;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const r = `${rel}/${e.name}`;
    if (e.isDirectory()) protoFiles(root, r, out);
    else if (e.name.endsWith('.proto')) out.push(r);
  }
}

/** Where the .proto files are: Envoy's and xDS's (deps/), Skua's Istio ones, and the import roots. */
export function protoDirs(): { deps: string; ownDir: string; includes: string[]; ownFiles: string[] } {
  const deps = depsDir();
  const ownDir = join(dirname(fileURLToPath(import.meta.url)), 'proto');
  const pbjsDir = dirname(require.resolve('protobufjs/package.json'));
  const includes = [
    join(deps, 'envoy-api'), join(deps, 'xds'), join(deps, 'googleapis'),
    join(deps, 'protoc-gen-validate'), ownDir, pbjsDir,
  ];
  const ownFiles: string[] = [];
  protoFiles(ownDir, 'istio', ownFiles);
  return { deps, ownDir, includes, ownFiles };
}

let cached: Root | undefined;

export function xdsRoot(): Root {
  if (cached) return cached;
  const dirs = protoDirs();
  const file = cachedRootFile(dirs.ownDir, dirs.ownFiles, LOADED_TREES);
  const kept = file ? readCachedRoot(file) : undefined;
  if (kept) return (cached = kept);
  cached = parseRoot(dirs);
  if (file) writeCachedRoot(file, cached);
  return cached;
}

/** The Root from the .proto files themselves (what proto-cache.ts keeps). */
export function parseRoot({ deps, ownFiles, includes }: ReturnType<typeof protoDirs>): Root {
  const root = new protobuf.Root();
  root.resolvePath = (_origin: string, target: string): string | null => {
    if (target.startsWith('/')) return target;
    // protobufjs bundles the well-known types (any, duration, struct, wrappers, ...) by bare name.
    if (target.startsWith('google/protobuf/') && target !== 'google/protobuf/descriptor.proto') return target;
    for (const inc of includes) {
      const p = join(inc, target);
      if (existsSync(p)) return p;
    }
    return target;
  };
  // A few deprecated extension protos import v2 files the package does not ship: skip those (and
  // anything importing them) instead of failing the whole load.
  const loadable = new Map<string, boolean>();
  const canLoad = (target: string): boolean => {
    const known = loadable.get(target);
    if (known !== undefined) return known;
    loadable.set(target, true); // cycles: assume fine while visiting
    const path = root.resolvePath('', target);
    let ok = true;
    if (path === null || !path.startsWith('/')) ok = path !== null && path.startsWith('google/protobuf/');
    else {
      for (const m of readFileSync(path, 'utf8').matchAll(/^\s*import\s+(?:public\s+|weak\s+)?"([^"]+)"/gm)) {
        if (!canLoad(m[1])) { ok = false; break; }
      }
    }
    loadable.set(target, ok);
    return ok;
  };
  const files: string[] = [];
  for (const [inc, rel] of LOADED_TREES) {
    const list: string[] = [];
    protoFiles(join(deps, inc), rel, list);
    for (const f of list) if (canLoad(f)) files.push(f);
  }
  for (const f of ownFiles) files.push(f);
  root.loadSync(files, { keepCase: true });
  root.resolveAll();
  return root;
}

const typeCache = new Map<string, Type | null>();

/** The message type named by a type URL (`type.googleapis.com/envoy.config.listener.v3.Listener`), or null. */
export function typeForUrl(typeUrl: string): Type | null {
  let t = typeCache.get(typeUrl);
  if (t !== undefined) return t;
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  t = null;
  if (name !== '') {
    const found = xdsRoot().lookup(name);
    if (found instanceof protobuf.Type) t = found;
  }
  typeCache.set(typeUrl, t);
  return t;
}

export function isEnum(x: unknown): x is Enum {
  return x instanceof protobuf.Enum;
}

export function isType(x: unknown): x is Type {
  return x instanceof protobuf.Type;
}
