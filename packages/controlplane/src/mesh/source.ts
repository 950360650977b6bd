/**
 * A watched mesh file (`--mesh FILE`): parsed, translated and encoded into resource groups on
 * every change. A file that fails keeps its last good config serving and is reported.
 */
import { readFileSync, watch, type FSWatcher } from 'node:fs';
import { basename, dirname } from 'node:path';
import { parse } from 'yaml';
import type { CpResource, ResourceGroup } from '../ads/resources.ts';
import { groupOf } from '../files.ts';
import { parseMesh } from './model.ts';
import { translateMesh, type MeshConfig } from './translate.ts';

/** The translated mesh as resource groups: shared clusters for its sidecars, per-sidecar config, WDS for all. */
export function meshGroups(source: string, config: MeshConfig): ResourceGroup[] {
  const ids = [...config.sidecars.keys()];
  const groups: ResourceGroup[] = [];
  if (ids.length) groups.push(groupOf(`${source}#clusters`, config.sharedClusters, ids));
  // Sidecars in one namespace mostly get identical listeners and routes: encode each once.
  const cache = new Map<string, CpResource>();
  for (const [id, resources] of config.sidecars) groups.push(groupOf(`${source}#${id}`, resources, [id], cache));
  groups.push(groupOf(`${source}#wds`, config.wds));
  if (config.discovery?.length) groups.push(groupOf(`${source}#workloads`, config.discovery));
  return groups;
}

export function loadMeshFile(file: string): ResourceGroup[] {
  return meshGroups(file, translateMesh(parseMesh(parse(readFileSync(file, 'utf8')))));
}

export class MeshSource {
  private readonly file: string;
  private groups: ResourceGroup[] = [];
  private watcher: FSWatcher | undefined;
  private timer: NodeJS.Timeout | undefined;
  problem = '';

  constructor(file: string) {
    this.file = file;
  }

  /** Re-reads the file; on failure keeps the last good groups and sets `problem`. */
  load(): ResourceGroup[] {
    try {
      this.groups = loadMeshFile(this.file);
      this.problem = '';
    } catch (e) {
      this.problem = (e as Error).message;
    }
    return this.groups;
  }

  /** Watches the file's directory (editors and atomic writes replace the file). */
  watch(onChange: (groups: ResourceGroup[], problem: string) => void, debounceMs = 100): void {
    const name = basename(this.file);
    this.watcher = watch(dirname(this.file), (_event, f) => {
      if (f !== null && f !== name) return;
      clearTimeout(this.timer);
      this.timer = setTimeout(() => onChange(this.load(), this.problem), debounceMs);
    });
  }

  close(): void {
    clearTimeout(this.timer);
    this.watcher?.close();
  }
}
