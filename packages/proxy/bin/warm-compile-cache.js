#!/usr/bin/env node
// Fills Node's compile cache with every module skua-proxy can load, so that the first start already
// finds it warm and never loads type stripping's compiler (~20 MB anonymous memory for the life of the
// process, issue 13), and keeps the parsed xDS proto Root beside it (src/xds/proto-cache.ts). A pod
// starts from an empty /tmp, so the image runs this at build time.
//   warm-compile-cache.js [DIR]     (default: $NODE_COMPILE_CACHE, else Node's default directory)
// Node keys the cache directory by uid: run it as the user the proxy runs as.
import { execFileSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import { startWithV8Flags } from './v8-flags.js';

// Under skua-proxy's V8 flags: they are part of the cache's key (v8-flags.js).
startWithV8Flags();

const SRC = new URL('../src/', import.meta.url);
const BIN = fileURLToPath(new URL('skua-proxy.js', import.meta.url));

// main.ts runs the command line when loaded: `skua-proxy --version` loads it instead.
const modules = () => readdirSync(fileURLToPath(SRC), { recursive: true }).filter((f) => f.endsWith('.ts') && f !== 'main.ts');

if (process.argv[2] === '--load') {
  // One pass per way a module gets loaded: the cache keys a module loaded by `import` by its URL and one
  // loaded by `require` (extensions and xDS load on first use that way) by its path.
  // A module that fails to load is left out: warming is an optimisation, never a reason to fail (an image build).
  if (process.argv[3] === 'import') {
    for (const f of modules()) {
      try { await import(new URL(f, SRC).href); } catch (err) { process.stderr.write(`warm-compile-cache: ${f}: ${err.message}\n`); }
    }
    // The xDS proto Root, parsed once and kept beside the compile cache (src/xds/proto-cache.ts).
    try { (await import(new URL('xds/protos.ts', SRC).href)).xdsRoot(); } catch (err) { process.stderr.write(`warm-compile-cache: xDS protos: ${err.message}\n`); }
  } else {
    const require = createRequire(import.meta.url);
    for (const f of modules()) {
      try { require(fileURLToPath(new URL(f, SRC))); } catch { /* a module with top-level await: import only */ }
    }
  }
  process.exit(0);
}

// Node's default directory is <tmpdir>/node-compile-cache, where the bin's enableCompileCache() looks too.
const dir = process.argv[2] ?? process.env.NODE_COMPILE_CACHE ?? join(tmpdir(), 'node-compile-cache');
const self = fileURLToPath(import.meta.url);
for (const args of [[self, '--load', 'import'], [self, '--load', 'require'], [BIN, '--version']]) {
  execFileSync(process.execPath, args, { env: { ...process.env, NODE_COMPILE_CACHE: dir }, stdio: ['ignore', 'ignore', 'inherit'] });
}
process.stdout.write(`compile cache: ${modules().length + 1} modules of skua-proxy and their dependencies in ${dir}\n`);
