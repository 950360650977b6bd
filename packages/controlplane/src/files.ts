/**
 * Resources from files: a directory of YAML/JSON files, watched. Each file holds any of
 *  - `resources: [...]` (a DiscoveryResponse-shaped list of `{"@type": ...}` resources),
 *  - an Envoy /config_dump (its dynamic listeners, clusters, routes, endpoints, secrets),
 *  - a single resource with `@type`, or a YAML stream of the above,
 *  - WDS resources for ztunnel (`istio.workload.Address`, `istio.security.Authorization`; Delta only),
 * optionally with `for_nodes: ["sidecar~*", "<node id>"]` to serve it only to those nodes.
 * A file that fails to parse or encode is reported and its last good content keeps serving.
 */
import { readdirSync, readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { parseAllDocuments } from 'yaml';
import { encodeResource, resourceName, TYPE_URL } from '@skua/proxy/xds';
import { contentVersion, selectorOf, type CpResource, type ResourceGroup } from './ads/resources.ts';

type Json = Record<string, unknown>;

export interface FileProblem {
  readonly file: string;
  readonly message: string;
}

/**
 * Encodes a list of proto-JSON resources (with `@type`) into a group. Throws naming the resource
 * and the field's path (`paths[i]`: where resource i sits in its file; `resources[i]` by default).
 * `cache` (JSON text → resource) lets many groups share the encoding of identical resources.
 */
export function groupOf(source: string, resources: readonly Json[], forNodes?: readonly string[], cache?: Map<string, CpResource>,
  paths?: readonly string[]): ResourceGroup {
  const byType = new Map<string, Map<string, CpResource>>();
  for (const [i, raw] of resources.entries()) {
    const where = paths?.[i] ?? `resources[${i}]`;
    const typeUrl = String(raw['@type'] ?? '');
    const json = typeUrl === TYPE_URL.authorization ? authorizationFromGroups(raw) : raw;
    const name = resourceName(typeUrl, json) || String(json.cluster_name ?? json.clusterName ?? '');
    if (!name) throw new Error(`${where || 'the resource'} (${typeUrl || 'no @type'}) has no name`);
    const key = cache ? JSON.stringify(json) : '';
    let r = cache?.get(key);
    if (!r) {
      let any;
      try { any = encodeResource(json, where); } catch (e) { throw new Error(`${name}: ${(e as Error).message}`); }
      r = { name, version: contentVersion(any.value), any };
      cache?.set(key, r);
    }
    let m = byType.get(typeUrl);
    if (!m) { m = new Map(); byType.set(typeUrl, m); }
    m.set(name, r);
  }
  return { source, nodes: selectorOf(forNodes), byType };
}

/**
 * istiod's WDS goldens print an Authorization's three rule levels as groups/rules/matches; the wire
 * (and ztunnel's proto) calls them rules/clauses/matches. Accept both spellings.
 */
export function authorizationFromGroups(json: Json): Json {
  if (!Array.isArray(json.groups)) return json;
  const { groups, ...rest } = json;
  return { ...rest, rules: (groups as Json[]).map((g) => ({ clauses: Array.isArray(g.rules) ? g.rules : [] })) };
}

/**
 * The resources a parsed document holds (see the module comment for the shapes), each with its
 * path in the document (`resources[3]`, `configs[1].dynamic_active_clusters[0].cluster`, '').
 */
export function resourcesInDocument(doc: unknown): { resources: Json[]; paths: string[]; forNodes: string[] | undefined } {
  const out: Json[] = [];
  const paths: string[] = [];
  if (doc === null || typeof doc !== 'object') return { resources: out, paths, forNodes: undefined };
  const d = doc as Json;
  const forNodes = Array.isArray(d.for_nodes) ? d.for_nodes.map(String) : undefined;
  if (Array.isArray(d.resources)) d.resources.forEach((r, i) => { out.push(r as Json); paths.push(`resources[${i}]`); });
  else if (Array.isArray(d.configs)) d.configs.forEach((c, i) => fromConfigDump(c as Json, `configs[${i}]`, out, paths));
  else if (typeof d['@type'] === 'string') { out.push(d); paths.push(''); }
  return { resources: out, paths, forNodes };
}

/** The dynamic sections of an admin.v3 *ConfigDump (active state only), with their paths. */
function fromConfigDump(c: Json, base: string, out: Json[], paths: string[]): void {
  const take = (key: string, ...path: string[]): void => {
    const k = key in c ? key : camel(key);
    const list = c[k];
    if (!Array.isArray(list)) return;
    list.forEach((item, i) => {
      let v: unknown = item;
      let where = `${base}.${k}[${i}]`;
      for (const p of path) {
        if (!v || typeof v !== 'object') break;
        const pk = p in v ? p : camel(p);
        v = (v as Json)[pk];
        where += `.${pk}`;
      }
      if (v && typeof v === 'object') { out.push(v as Json); paths.push(where); }
    });
  };
  take('dynamic_listeners', 'active_state', 'listener');
  take('dynamic_active_clusters', 'cluster');
  take('dynamic_route_configs', 'route_config');
  take('dynamic_endpoint_configs', 'endpoint_config');
  take('dynamic_active_secrets', 'secret');
  take('ecds_filters', 'ecds_filter');
}

function camel(k: string): string {
  return k.replace(/_([a-z])/g, (_m, ch: string) => ch.toUpperCase());
}

export function loadFile(file: string): ResourceGroup {
  const text = readFileSync(file, 'utf8');
  const resources: Json[] = [];
  const paths: string[] = [];
  let forNodes: string[] | undefined;
  const docs = file.endsWith('.json') ? [JSON.parse(text) as unknown] : parseAllDocuments(text).map((d) => {
    if (d.errors.length) throw new Error(d.errors[0].message);
    return d.toJS() as unknown;
  });
  for (const [i, doc] of docs.entries()) {
    const r = resourcesInDocument(doc);
    resources.push(...r.resources);
    // In a YAML stream, say which document: `documents[1].resources[0]` is in the second one.
    paths.push(...r.paths.map((p) => (docs.length > 1 ? (p ? `documents[${i}].${p}` : `documents[${i}]`) : p)));
    forNodes = r.forNodes ?? forNodes;
  }
  return groupOf(file, resources, forNodes, undefined, paths);
}

/** A watched directory: calls `onChange` with every file's current group after each change. */
export class FileSource {
  private readonly dir: string;
  private readonly groups = new Map<string, { mtimeMs: number; size: number; group: ResourceGroup }>();
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  readonly problems: FileProblem[] = [];

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Reads every file (re-encoding only files that changed); problems keep the last good content. */
  scan(): ResourceGroup[] {
    this.problems.length = 0;
    const seen = new Set<string>();
    for (const name of readdirSync(this.dir).sort()) {
      if (!/\.(ya?ml|json)$/.test(name)) continue;
      const file = join(this.dir, name);
      seen.add(file);
      let st;
      try { st = statSync(file); } catch { continue; }
      const known = this.groups.get(file);
      if (known && known.mtimeMs === st.mtimeMs && known.size === st.size) continue;
      try {
        this.groups.set(file, { mtimeMs: st.mtimeMs, size: st.size, group: loadFile(file) });
      } catch (e) {
        this.problems.push({ file, message: (e as Error).message });
      }
    }
    for (const f of [...this.groups.keys()]) if (!seen.has(f)) this.groups.delete(f);
    return [...this.groups.values()].map((g) => g.group);
  }

  watch(onChange: (groups: ResourceGroup[], problems: readonly FileProblem[]) => void, debounceMs = 100): void {
    this.watcher = watch(this.dir, () => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => onChange(this.scan(), this.problems), debounceMs);
    });
  }

  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
  }
}
