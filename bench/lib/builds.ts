/**
 * Which skua-proxy builds a run measures: the working tree's (--skua, the shipped bin by default), or
 * git refs side by side (--ref main,WORKTREE) — each ref's packages/proxy extracted with `git archive`
 * into the run's temp dir, borrowing this checkout's node_modules and native addons — each with the
 * NODE_OPTIONS its Dockerfile gives the proxy image. Before any is
 * measured, one compile cache is filled for all of them (bin/warm-compile-cache.js, as the image does),
 * so no start pays for type stripping.
 */
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, mkdirSync, readFileSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_SKUA_MAIN, REPO_ROOT } from './targets.ts';

export interface SkuaBuild {
  /** '' for the only build; the ref otherwise (labels get " @ref"). */
  readonly name: string;
  /** Entry script, absolute. */
  readonly main: string;
  /** The environment it runs with: NODE_OPTIONS as the proxy image sets it (V8 flags). */
  readonly env: Record<string, string>;
}

/**
 * NODE_OPTIONS of the Dockerfile's proxy stage (`ENV NODE_OPTIONS=...`), at `ref` or in the working tree:
 * the V8 flags the image runs the proxy with, so that benchmarks measure what ships. '' when none.
 */
export function shippedNodeOptions(ref?: string): string {
  let text = '';
  try {
    text = ref && ref !== 'WORKTREE'
      ? execFileSync('git', ['-C', REPO_ROOT, 'show', `${ref}:Dockerfile`], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] })
      : readFileSync(path.join(REPO_ROOT, 'Dockerfile'), 'utf8');
  } catch { return ''; }
  const stage = /^FROM\s+\S+\s+AS\s+proxy\s*$([\s\S]*?)(?=^FROM\s|(?![\s\S]))/im.exec(text)?.[1] ?? '';
  const m = /^ENV\s+NODE_OPTIONS=("?)(.*)\1\s*$/m.exec(stage);
  return m ? m[2].trim() : '';
}

const WARM = 'packages/proxy/bin/warm-compile-cache.js';
const V8_FLAGS = 'packages/proxy/bin/v8-flags.js';

/** Extract `ref`'s packages/proxy under `tmp`; returns its bin (or src/main.ts for refs before the bin). */
export function extractRef(ref: string, tmp: string): string {
  if (ref === 'WORKTREE') return path.join(REPO_ROOT, DEFAULT_SKUA_MAIN);
  const dir = path.join(tmp, `ref-${ref.replace(/[^\w.-]/g, '_')}`);
  if (!existsSync(dir)) {
    mkdirSync(dir, { recursive: true });
    const has = (p: string): boolean => { try { execFileSync('git', ['-C', REPO_ROOT, 'cat-file', '-e', `${ref}:${p}`], { stdio: 'ignore' }); return true; } catch { return false; } };
    const paths = ['package.json', 'packages/proxy/package.json', 'packages/proxy/src', 'packages/proxy/bin'].filter(has);
    const tar = execFileSync('git', ['-C', REPO_ROOT, 'archive', ref, ...paths], { maxBuffer: 256 << 20 });
    execFileSync('tar', ['-x', '-C', dir], { input: tar });
    symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
    symlinkSync(path.join(REPO_ROOT, 'packages/proxy/node_modules'), path.join(dir, 'packages/proxy/node_modules'));
    symlinkSync(path.join(REPO_ROOT, 'packages/proxy/native'), path.join(dir, 'packages/proxy/native'));
    // A ref older than the warm-up script borrows this checkout's (it only imports the ref's own modules).
    // It imports its sibling v8-flags.js, which such a ref lacks too (the ref's bin does not re-exec with
    // those flags, so its starts may miss the cache: RSS then includes type stripping, CPU barely moves).
    for (const file of [WARM, V8_FLAGS]) {
      if (existsSync(path.join(dir, 'packages/proxy/bin')) && !existsSync(path.join(dir, file))) copyFileSync(path.join(REPO_ROOT, file), path.join(dir, file));
    }
  }
  const bin = path.join(dir, DEFAULT_SKUA_MAIN);
  return existsSync(bin) ? bin : path.join(dir, 'packages/proxy/src/main.ts');
}

export function skuaBuilds(refs: readonly string[], skuaMain: string, tmp: string): SkuaBuild[] {
  if (refs.length === 0) return [{ name: '', main: path.resolve(REPO_ROOT, skuaMain), env: { NODE_OPTIONS: shippedNodeOptions() } }];
  return refs.map((ref) => ({ name: ref, main: extractRef(ref, tmp), env: { NODE_OPTIONS: shippedNodeOptions(ref) } }));
}

/** Fill `cacheDir` for every build (NODE_COMPILE_CACHE is set for everything the run starts). */
export function warmCompileCaches(builds: ReadonlyArray<Pick<SkuaBuild, 'name' | 'main'>>, cacheDir: string, log: (m: string) => void): void {
  for (const b of builds) {
    const warm = path.join(path.dirname(b.main), 'warm-compile-cache.js');
    if (!existsSync(warm)) { log(`${b.name || path.relative(REPO_ROOT, b.main)}: not the bin, no compile cache`); continue; }
    process.env.NODE_COMPILE_CACHE = cacheDir;
    log(`warming the compile cache for ${b.name || path.relative(REPO_ROOT, b.main)}`);
    execFileSync(process.execPath, [warm], { stdio: 'ignore', timeout: 180_000 });
  }
}

/** " @ref" when builds are compared, '' otherwise. */
export function buildSuffix(b: SkuaBuild): string {
  return b.name ? ` @${b.name}` : '';
}
