#!/usr/bin/env node
// skua-proxy: Envoy-compatible command line (see src/main.ts). Needs Node >= 24 (type stripping).
import { enableCompileCache } from 'node:module';
import { setFlagsFromString } from 'node:v8';
import { startWithV8Flags } from './v8-flags.js';

// V8 flags that take effect only from V8's start (why: v8-flags.js).
startWithV8Flags();

// Type stripping's compiler (amaro, WebAssembly) holds ~20 MB of anonymous memory for the life of the
// process once loaded; with the compile cache warm it never loads (issue 13). NODE_COMPILE_CACHE picks
// the directory (default <tmpdir>/node-compile-cache); a directory that cannot be written is skipped.
enableCompileCache();

// A proxy under steady load promotes a few MB/s of short-lived request objects to V8's old generation,
// which V8 lets grow to several times its live size before a mark-compact: a sidecar at 1,000 req/s
// sat at 200-340 MB RSS with ~45 MB live (issue 13). Old-generation limits of 1.5x the live size after
// each mark-compact keep it near 130-180 MB for ~1% CPU of concurrent marking. V8 reads this flag when
// it sets the next limit, so it applies from here on; it is not allowed in NODE_OPTIONS. A flag given
// on the command line wins.
if (!process.execArgv.some((a) => a.startsWith('--heap-growing-percent'))) setFlagsFromString('--heap-growing-percent=50');
await import('../src/main.ts');
