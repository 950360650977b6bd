import type { CpResource, ResourceGroup } from './resources.ts';
import { resourcesFor } from './resources.ts';

/** What a stream needs from the store. */
export interface ResourceView {
  resources(nodeId: string, typeUrl: string): Map<string, CpResource>;
}

/**
 * The control plane's current config: resource groups swapped whole on every change.
 * Streams register to be told; each works out for itself what changed for its node.
 */
export class Snapshot implements ResourceView {
  private groups: readonly ResourceGroup[] = [];
  private readonly watchers = new Set<() => void>();
  /** Per node and type, the merged view (recomputed after each change). */
  private cache = new Map<string, Map<string, CpResource>>();
  version = 0;

  set(groups: readonly ResourceGroup[]): void {
    this.groups = groups;
    this.cache = new Map();
    this.version++;
    for (const w of this.watchers) w();
  }

  resources(nodeId: string, typeUrl: string): Map<string, CpResource> {
    const key = `${nodeId}\0${typeUrl}`;
    let m = this.cache.get(key);
    if (!m) { m = resourcesFor(this.groups, nodeId, typeUrl); this.cache.set(key, m); }
    return m;
  }

  onChange(fn: () => void): () => void {
    this.watchers.add(fn);
    return () => this.watchers.delete(fn);
  }

  get resourceCount(): number {
    let n = 0;
    for (const g of this.groups) for (const m of g.byType.values()) n += m.size;
    return n;
  }
}
