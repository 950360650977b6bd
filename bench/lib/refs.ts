/** Another build of skua-proxy to compare with the working tree: a git ref's packages/proxy, extracted. */
import { execFileSync } from 'node:child_process';
import { mkdirSync, symlinkSync } from 'node:fs';
import path from 'node:path';
import { DEFAULT_SKUA_MAIN, REPO_ROOT } from './targets.ts';

/**
 * The skua entry script for a git ref (its packages/proxy extracted with `git archive` into
 * `tmp`, borrowing this checkout's node_modules and native addons), or for `WORKTREE` the files
 * as they are now.
 */
export function skuaEntryForRef(ref: string, tmp: string): string {
  if (ref === 'WORKTREE') return path.join(REPO_ROOT, DEFAULT_SKUA_MAIN);
  const dir = path.join(tmp, `ref-${ref.replace(/[^\w.-]/g, '_')}`);
  mkdirSync(dir, { recursive: true });
  const tar = execFileSync('git', ['-C', REPO_ROOT, 'archive', ref, 'package.json', 'packages/proxy/package.json', 'packages/proxy/src'],
    { maxBuffer: 256 << 20 });
  execFileSync('tar', ['-x', '-C', dir], { input: tar });
  symlinkSync(path.join(REPO_ROOT, 'node_modules'), path.join(dir, 'node_modules'));
  symlinkSync(path.join(REPO_ROOT, 'packages/proxy/node_modules'), path.join(dir, 'packages/proxy/node_modules'));
  symlinkSync(path.join(REPO_ROOT, 'packages/proxy/native'), path.join(dir, 'packages/proxy/native'));
  return path.join(dir, DEFAULT_SKUA_MAIN);
}
