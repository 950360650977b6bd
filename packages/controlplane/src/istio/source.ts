/**
 * A watched directory of Istio YAML (`--istio DIR`): every file is read and validated on its own; a
 * file with an error keeps its last good content serving (and is reported), the rest is built into
 * the mesh, analysed (broken references are reported, istiod-style, without refusing the file) and
 * translated into resource groups. A translation failure keeps the whole last good config.
 */
import { readdirSync, readFileSync, statSync, watch, type FSWatcher } from 'node:fs';
import { join, relative } from 'node:path';
import type { ResourceGroup } from '../ads/resources.ts';
import { meshGroups } from '../mesh/source.ts';
import { translateMesh } from '../mesh/translate.ts';
import { collect, buildMesh } from './build/build.ts';
import { formatProblem, isError, readText, type LoadedDoc, type Problem } from './documents.ts';
import type { IstioResource } from './types-k8s.ts';

const CONFIG_FILE = /\.(ya?ml|json)$/;

/** Every config file under `dir` (subdirectories too), sorted. */
export function configFiles(dir: string): string[] {
  const out: string[] = [];
  const walk = (d: string): void => {
    for (const e of readdirSync(d, { withFileTypes: true }).sort((a, b) => a.name.localeCompare(b.name))) {
      if (e.name.startsWith('.')) continue;
      const p = join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (CONFIG_FILE.test(e.name)) out.push(p);
    }
  };
  walk(dir);
  return out;
}

export function readFile(file: string, shownAs = file): LoadedDoc[] {
  let text: string;
  try { text = readFileSync(file, 'utf8'); } catch (err) {
    return [{ resource: undefined, problems: [{ level: 'Error', code: 'IST0106', file: shownAs, resource: 'file', field: '', message: `cannot read: ${(err as Error).message}` }] }];
  }
  return readText(text, shownAs);
}

/** Resources → translated groups; throws when the translation refuses the combination. */
export function translateIstio(source: string, resources: readonly IstioResource[]): { groups: ResourceGroup[]; problems: readonly Problem[] } {
  const { mesh, problems } = buildMesh(collect(resources));
  return { groups: meshGroups(source, translateMesh(mesh)), problems };
}

interface FileState { readonly mtimeMs: number; readonly size: number; readonly resources: readonly IstioResource[]; readonly problems: readonly Problem[] }

/** What the directory holds now (paths, sizes, times): a change means something to reload. */
function signature(dir: string): string {
  return configFiles(dir).map((f) => { try { const st = statSync(f); return `${f}:${st.size}:${st.mtimeMs}`; } catch { return f; } }).join('\n');
}

export class IstioSource {
  private readonly dir: string;
  private readonly files = new Map<string, FileState>();
  private groups: ResourceGroup[] = [];
  private readonly watchers = new Map<string, FSWatcher>();
  private timer: NodeJS.Timeout | undefined;
  private poll: NodeJS.Timeout | undefined;
  private seen = '';
  /** The current problems: files refused (their last good content serves) and analysis findings. */
  problems: Problem[] = [];
  /** Set when the translation failed and the last good config keeps serving. */
  failure = '';

  constructor(dir: string) {
    this.dir = dir;
  }

  /** Re-reads changed files and rebuilds. */
  load(): ResourceGroup[] {
    this.seen = signature(this.dir);
    const seen = new Set<string>();
    for (const file of configFiles(this.dir)) {
      seen.add(file);
      let st;
      try { st = statSync(file); } catch { continue; }
      const known = this.files.get(file);
      if (known && known.mtimeMs === st.mtimeMs && known.size === st.size) continue;
      const docs = readFile(file, relative(this.dir, file) || file);
      const problems = docs.flatMap((d) => d.problems);
      // A file with an error keeps its last good resources (none when it never was good).
      const resources = problems.some(isError) ? known?.resources ?? [] : docs.map((d) => d.resource).filter((r) => r !== undefined);
      this.files.set(file, { mtimeMs: st.mtimeMs, size: st.size, resources, problems });
    }
    for (const f of [...this.files.keys()]) if (!seen.has(f)) this.files.delete(f);
    const fileProblems = [...this.files.values()].flatMap((f) => f.problems);
    try {
      const { groups, problems } = translateIstio(`istio:${this.dir}`, [...this.files.values()].flatMap((f) => f.resources));
      this.groups = groups;
      this.failure = '';
      this.problems = [...fileProblems, ...problems];
    } catch (err) {
      this.failure = (err as Error).message;
      this.problems = fileProblems;
    }
    return this.groups;
  }

  /** Lines for the log: refused files, translation failure, analysis findings. */
  report(): string[] {
    const lines = this.problems.map((p) => formatProblem(p) + (isError(p) && p.code === 'IST0106' ? ' (the file\'s last good content keeps serving)' : ''));
    if (this.failure) lines.push(`translation failed: ${this.failure} (the last good config keeps serving)`);
    return lines;
  }

  /**
   * Watches the directory and its subdirectories, each with its own (non-recursive) watcher: Node's
   * recursive watch on Linux watches files by inode and loses a file replaced by rename (the way
   * editors and `apply` write). A slow poll of the directory's signature backs the watchers up.
   */
  watch(onChange: (groups: ResourceGroup[]) => void, debounceMs = 100, pollMs = 2000): void {
    const changed = (): void => {
      clearTimeout(this.timer);
      this.timer = setTimeout(() => { const g = this.load(); this.watchDirs(changed); onChange(g); }, debounceMs);
    };
    this.watchDirs(changed);
    this.poll = setInterval(() => { if (signature(this.dir) !== this.seen) changed(); }, pollMs);
    this.poll.unref();
  }

  private watchDirs(changed: () => void): void {
    const dirs = new Set([this.dir]);
    const walk = (d: string): void => {
      for (const e of readdirSync(d, { withFileTypes: true })) if (e.isDirectory() && !e.name.startsWith('.')) { dirs.add(join(d, e.name)); walk(join(d, e.name)); }
    };
    try { walk(this.dir); } catch { /* a directory vanished while walking: the next change rewalks */ }
    for (const [d, w] of this.watchers) if (!dirs.has(d)) { w.close(); this.watchers.delete(d); }
    for (const d of dirs) {
      if (this.watchers.has(d)) continue;
      try { this.watchers.set(d, watch(d, changed)); } catch { /* gone already */ }
    }
  }

  close(): void {
    clearTimeout(this.timer);
    clearInterval(this.poll);
    for (const w of this.watchers.values()) w.close();
    this.watchers.clear();
  }
}
