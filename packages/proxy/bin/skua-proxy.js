#!/usr/bin/env node
// skua-proxy: Envoy-compatible command line (see src/main.ts). Needs Node >= 24 (type stripping).
import { enableCompileCache } from 'node:module';
import { startWithV8Flags } from './v8-flags.js';

// V8 flags that take effect only from V8's start (why: v8-flags.js).
startWithV8Flags();

// Type stripping's compiler (amaro, WebAssembly) holds ~20 MB of anonymous memory for the life of the
// process once loaded; with the compile cache warm it never loads (issue 13). NODE_COMPILE_CACHE picks
// the directory (default <tmpdir>/node-compile-cache); a directory that cannot be written is skipped.
enableCompileCache();

await import('../src/main.ts');
