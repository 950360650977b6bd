#!/usr/bin/env node
// skua-ztunnel: the per-node L4 proxy of Istio's ambient mode (see src/main.ts). Needs Node >= 24 (type stripping).
import { enableCompileCache } from 'node:module';
import { restartWithV8Flags } from './v8-flags.js';

// V8's heap bounds (why: v8-flags.js); they take effect only from V8's start.
restartWithV8Flags();

// With the compile cache warm, type stripping's compiler (amaro, ~20 MB of anonymous memory for the
// life of the process) never loads. NODE_COMPILE_CACHE picks the directory (default
// <tmpdir>/node-compile-cache; the image fills /var/lib/skua/compile-cache at build time with
// warm-compile-cache.js); one that cannot be written is skipped.
enableCompileCache();
await import('../src/main.ts');
