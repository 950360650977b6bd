/** Installs the Debian packages a run needs, if they are missing. */
import { spawnSync } from 'node:child_process';
import { progress } from './progress.ts';

function installed(pkg: string): boolean {
  const r = spawnSync('dpkg-query', ['-W', '-f=${Status}', pkg], { encoding: 'utf8' });
  return r.status === 0 && r.stdout.includes('install ok installed');
}

function aptGet(args: string[]): void {
  // Wait for a dpkg lock held by another installer instead of failing.
  const full = ['-o', 'DPkg::Lock::Timeout=300', ...args];
  const r = spawnSync('apt-get', full, {
    stdio: ['ignore', 'ignore', 'pipe'], encoding: 'utf8',
    env: { ...process.env, DEBIAN_FRONTEND: 'noninteractive' },
  });
  if (r.status !== 0) throw new Error(`apt-get ${args.join(' ')} failed:\n${r.stderr}`);
}

export function ensurePackages(pkgs: string[]): void {
  const missing = [...new Set(pkgs)].filter((p) => !installed(p));
  if (missing.length === 0) return;
  if (process.getuid?.() !== 0) {
    throw new Error(`missing Debian packages: ${missing.join(' ')} (run as root or install them)`);
  }
  progress('setup', `installing ${missing.join(' ')} (apt-get)`);
  aptGet(['update', '-qq']);
  aptGet(['install', '-y', '-qq', '--no-install-recommends', ...missing]);
}

/** First line of `cmd args` (stdout or stderr), for recording tool versions. */
export function versionOf(cmd: string, args: string[]): string {
  const r = spawnSync(cmd, args, { encoding: 'utf8' });
  const text = `${r.stdout ?? ''}${r.stderr ?? ''}`.trim();
  return text.split('\n')[0] ?? '';
}
