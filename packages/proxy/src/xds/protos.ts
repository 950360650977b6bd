/**
 * Envoy's data-plane-api .proto files (shipped inside @grpc/grpc-js-xds under deps/,
 * with the xds/udpa, validate and googleapis protos they import) plus Skua's own
 * declarations of Istio's filter configs, in one protobufjs Root filled on use.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import protobuf from 'protobufjs';
import type { Enum, Root, Type } from 'protobufjs';
import { packageFiles, protoDirs, protoFiles } from './proto-dirs.ts';
import { ownCopy, ownProtoStrings, type OwnedObjects } from './proto-strings.ts';

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

/**
 * The root and how files get into it. Envoy's packages load on first use of one of their types
 * (packages are directories, as in Envoy's API tree), with what they import: a sidecar uses a
 * few dozen of the ~470 files, and protobufjs reflection for all of them held ~14 MB of heap for
 * the process's life (issue 13).
 */
interface ProtoState {
  readonly root: Root;
  /** Include roots whose package directories load on demand (Envoy's, xDS's). */
  readonly lazyRoots: readonly string[];
  readonly canLoad: (target: string) => boolean;
  readonly triedDirs: Set<string>;
  /** Reflection objects whose strings have storage of their own (proto-strings.ts). */
  readonly owned: OwnedObjects;
}

let state: ProtoState | undefined;

function protoState(): ProtoState {
  if (state) return state;
  const { lazyRoots, ownFiles, includes } = protoDirs();
  const root = new protobuf.Root();
  root.resolvePath = resolverFor(includes);
  const canLoad = loadableCheck(root);
  root.loadSync(ownFiles as string[], { keepCase: true });
  root.resolveAll();
  state = { root, lazyRoots, canLoad, triedDirs: new Set(), owned: new WeakMap() };
  ownProtoStrings(root, state.owned);
  return state;
}

function resolverFor(includes: readonly string[]): (origin: string, target: string) => string | null {
  return (_origin, target) => {
    if (target.startsWith('/')) return target;
    // protobufjs bundles the well-known types (any, duration, struct, wrappers, ...) by bare name.
    if (target.startsWith('google/protobuf/') && target !== 'google/protobuf/descriptor.proto') return target;
    for (const inc of includes) {
      const p = join(inc, target);
      if (existsSync(p)) return p;
    }
    return target;
  };
}

/**
 * A few deprecated extension protos import v2 files the package does not ship: those (and
 * anything importing them) are skipped instead of failing the whole load. Names are kept as
 * copies: a slice of an import line would keep its whole .proto text alive.
 */
function loadableCheck(root: Root): (target: string) => boolean {
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
        if (!canLoad(ownCopy(m[1]))) { ok = false; break; }
      }
    }
    loadable.set(target, ok);
    return ok;
  };
  return canLoad;
}

function inLoadedTrees(rel: string): boolean {
  return LOADED_TREES.some(([, tree]) => rel === tree || rel.startsWith(`${tree}/`));
}

function loadFiles(s: ProtoState, files: readonly string[]): void {
  const wanted = files.filter((f) => s.canLoad(f));
  if (wanted.length === 0) return;
  s.root.loadSync(wanted as string[], { keepCase: true });
  // Only what was just added is walked (protobufjs marks the namespaces it added to).
  s.root.resolveAll();
  ownProtoStrings(s.root, s.owned);
}

/** Loads the package directory `fullName` belongs to (longest first), until the name is known. */
function loadPackageOf(s: ProtoState, fullName: string): void {
  for (const files of packageFiles(fullName, s.lazyRoots, s.triedDirs, inLoadedTrees)) {
    loadFiles(s, files);
    if (known(s.root, fullName)) return;
  }
}

function known(root: Root, fullName: string): Type | Enum | null {
  const found = root.lookup(fullName);
  return found instanceof protobuf.Type || found instanceof protobuf.Enum ? found : null;
}

/** A message or enum by full name (`envoy.type.v3.StatusCode`), its package loaded if needed; null when unknown. */
export function protoLookup(fullName: string): Type | Enum | null {
  const s = protoState();
  const hit = known(s.root, fullName);
  if (hit) return hit;
  loadPackageOf(s, fullName);
  return known(s.root, fullName);
}

/** The root with every file of the loaded trees in it (tests walk all of Envoy's types). */
export function xdsRootComplete(): Root {
  const s = protoState();
  const { deps } = protoDirs();
  const files: string[] = [];
  for (const [inc, rel] of LOADED_TREES) protoFiles(join(deps, inc), rel, files);
  loadFiles(s, files);
  return s.root;
}

const typeCache = new Map<string, Type | null>();

/** The message type named by a type URL (`type.googleapis.com/envoy.config.listener.v3.Listener`), or null. */
export function typeForUrl(typeUrl: string): Type | null {
  let t = typeCache.get(typeUrl);
  if (t !== undefined) return t;
  const name = typeUrl.slice(typeUrl.lastIndexOf('/') + 1);
  const found = name === '' ? null : protoLookup(name);
  t = found instanceof protobuf.Type ? found : null;
  typeCache.set(typeUrl, t);
  return t;
}

export function isEnum(x: unknown): x is Enum {
  return x instanceof protobuf.Enum;
}

export function isType(x: unknown): x is Type {
  return x instanceof protobuf.Type;
}
