#!/usr/bin/env node
// Fills Node's compile cache with every module skua-proxy can load, so that the first start already
// finds it warm and never loads type stripping's compiler (~20 MB anonymous memory for the life of the
// process, issue 13). A pod starts from an empty /tmp, so the image runs this at build time.
//   warm-compile-cache.js [DIR]     (default: $NODE_COMPILE_CACHE, else Node's default directory)
// Node keys the cache directory by uid: run it as the user the proxy runs as.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { enableCompileCache, flushCompileCache } from 'node:module';
import { fileURLToPath } from 'node:url';

const dir = process.argv[2] ?? process.env.NODE_COMPILE_CACHE;
const status = enableCompileCache(dir);
if (status.message) {
  process.stderr.write(`warm-compile-cache: ${status.message}\n`);
  process.exit(1);
}
const src = fileURLToPath(new URL('../src/', import.meta.url));
// main.ts runs the command line when imported: the bin below loads it instead.
const modules = readdirSync(src, { recursive: true }).filter((f) => f.endsWith('.ts') && f !== 'main.ts');
for (const f of modules) await import(new URL(f, new URL('../src/', import.meta.url)).href);
flushCompileCache();
const bin = fileURLToPath(new URL('skua-proxy.js', import.meta.url));
execFileSync(process.execPath, [bin, '--version'], { env: { ...process.env, NODE_COMPILE_CACHE: status.directory }, stdio: 'ignore' });
process.stdout.write(`compile cache: ${modules.length + 1} modules of skua-proxy and their dependencies in ${status.directory}\n`);
