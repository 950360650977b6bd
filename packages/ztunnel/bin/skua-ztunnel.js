#!/usr/bin/env node
// skua-ztunnel: the per-node L4 proxy of Istio's ambient mode (see src/main.ts). Needs Node >= 24 (type stripping).
import { enableCompileCache } from 'node:module';
import { setFlagsFromString } from 'node:v8';

// V8's young generation capped at 2 x 4 MB, as the proxy image caps it: by default V8 sizes it from
// the machine's memory (up to 2 x 64 MB on a 24 GiB node) and it never shrinks back — an idle in-pod
// ztunnel held 64 MB of new space after start-up, 128 MB after a connection burst (RSS 147 → 284 MB).
// Small, it also spares the relay its mark-compacts: a tunnel's buffers die young, freed by a
// scavenge, instead of piling up as external memory until V8 runs a full GC for them (one stream
// through the pair: 14 → 2 mark-compacts per GiB; bench/tools/hbone-loop.ts). The flag is read
// only when V8 starts, so the proxy restarts itself with it (execve: same pid, nothing else ran yet)
// unless it was given on the command line or in NODE_OPTIONS; the short-lived commands do not.
const YOUNG = '--max-semi-space-size';
const given = (flag) => process.execArgv.some((a) => a.startsWith(flag)) || (process.env.NODE_OPTIONS ?? '').includes(flag);
const proxy = process.argv[2] === undefined || process.argv[2] === 'proxy';
if (proxy && !given(YOUNG) && typeof process.execve === 'function') {
  process.execve(process.execPath, [process.execPath, `${YOUNG}=4`, ...process.execArgv, ...process.argv.slice(1)], process.env);
}

// As skua-proxy does (issue 13): the old generation's next limit 1.5x its live size after each
// mark-compact, instead of V8's 2-4x (read by V8 at each limit, so set at start; not allowed in
// NODE_OPTIONS). A flag given on the command line wins.
if (!given('--heap-growing-percent')) setFlagsFromString('--heap-growing-percent=50');

// With the compile cache warm, type stripping's compiler (amaro, ~20 MB of anonymous memory for
// the life of the process) never loads. NODE_COMPILE_CACHE picks the directory (default
// <tmpdir>/node-compile-cache); one that cannot be written is skipped.
enableCompileCache();
await import('../src/main.ts');
