#!/usr/bin/env node
// Fills Node's compile cache with every module skua-ztunnel can load, under the V8 flags it runs with
// (v8-flags.js: they are part of the cache's key), so that a ztunnel's first start already finds it
// warm and never loads type stripping's compiler (~20 MB more anonymous memory for the life of the
// process). A pod starts from an empty /tmp: the image runs this at build time.
//   warm-compile-cache.js [DIR]     (default: $NODE_COMPILE_CACHE, else Node's default directory)
// Node keys the cache directory by uid: run it as the user skua-ztunnel runs as.
import { enableCompileCache } from 'node:module';
import { readdirSync } from 'node:fs';
import { restartWithV8Flags } from './v8-flags.js';

restartWithV8Flags();
enableCompileCache(process.argv[2]);
const src = new URL('../src/', import.meta.url);
const api = new URL('../../proxy/src/api/', import.meta.url);
const modules = [
  ...readdirSync(src, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.ts') && f !== 'main.ts').map((f) => new URL(f, src)),
  ...readdirSync(api).filter((f) => f.endsWith('.ts')).map((f) => new URL(f, api)),
];
for (const m of modules) {
  try { await import(m.href); } catch (err) { process.stderr.write(`warm-compile-cache: ${m.pathname}: ${err.message}\n`); }
}
// main.ts runs the command line when loaded: as `skua-ztunnel version`.
process.argv.splice(2, Infinity, 'version');
await import(new URL('main.ts', src).href);
