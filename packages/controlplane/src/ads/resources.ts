/**
 * The control plane's resource sets: encoded once (Any bytes + a content version), grouped
 * by type, with per-node selection. A resource's version is a hash of its bytes, so a
 * restarted control plane reports the same versions and clients are not re-sent what they have.
 */
import { createHash } from 'node:crypto';
import type { AnyBytes } from '@skua/proxy/xds';

export interface CpResource {
  readonly name: string;
  readonly version: string;
  readonly any: AnyBytes;
}

/** Which nodes a group of resources is for: all, exact ids, or id prefixes (`sidecar~*`). */
export interface NodeSelector {
  readonly all: boolean;
  readonly exact: ReadonlySet<string>;
  readonly prefixes: readonly string[];
}

export const ALL_NODES: NodeSelector = { all: true, exact: new Set(), prefixes: [] };

export function selectorOf(patterns: readonly string[] | undefined): NodeSelector {
  if (!patterns || patterns.length === 0) return ALL_NODES;
  const exact = new Set<string>();
  const prefixes: string[] = [];
  for (const p of patterns) {
    if (p === '*') return ALL_NODES;
    if (p.endsWith('*')) prefixes.push(p.slice(0, -1));
    else exact.add(p);
  }
  return { all: false, exact, prefixes };
}

export function selects(s: NodeSelector, nodeId: string): boolean {
  return s.all || s.exact.has(nodeId) || s.prefixes.some((p) => nodeId.startsWith(p));
}

export function contentVersion(bytes: Uint8Array): string {
  return createHash('sha256').update(bytes).digest('hex').slice(0, 16);
}

/** One source's resources (a file, or a translated mesh) for the nodes it selects. */
export interface ResourceGroup {
  readonly source: string;
  readonly nodes: NodeSelector;
  /** typeUrl → name → resource */
  readonly byType: ReadonlyMap<string, ReadonlyMap<string, CpResource>>;
}

/** Everything a node sees of one type: the union of the groups that select it (later groups win). */
export function resourcesFor(groups: readonly ResourceGroup[], nodeId: string, typeUrl: string): Map<string, CpResource> {
  const out = new Map<string, CpResource>();
  for (const g of groups) {
    if (!selects(g.nodes, nodeId)) continue;
    const m = g.byType.get(typeUrl);
    if (m) for (const [k, v] of m) out.set(k, v);
  }
  return out;
}

/** The SotW version of a set of resources: a hash over names and versions (stable across restarts). */
export function setVersion(resources: Iterable<CpResource>): string {
  const h = createHash('sha256');
  const list = [...resources].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const r of list) h.update(r.name).update('\0').update(r.version).update('\n');
  return h.digest('hex').slice(0, 16);
}
