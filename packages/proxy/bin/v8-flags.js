// V8 flags skua-proxy runs with from V8's start: the bin restarts itself with any that are missing
// (process.execve: same pid, nothing else ran yet). They are part of the key of Node's compile cache
// (a module compiled under other flags is compiled again, with type stripping's compiler), so
// warm-compile-cache.js runs under them too.
//  --concurrent-marking-max-worker-num=1: one helper thread for V8's concurrent marking (default: as
//    many as Node's platform pool, 4). A sidecar gets a core or two; on 2 cores the helpers marking a
//    200 MB heap took the CPU from the thread serving traffic: a 20,000-cluster SotW push (bench
//    xds-scale) had p99 1.75-2.24x idle with the default, 1.61-1.72x with one helper (issue 16). V8
//    reads it when marking starts its jobs: setFlagsFromString at run time changed nothing.
//  --heap-growing-percent=50: a proxy under steady load promotes a few MB/s of short-lived request
//    objects to V8's old generation, which V8 lets grow to several times its live size before a
//    mark-compact: a sidecar at 1,000 req/s sat at 200-340 MB RSS with ~45 MB live. Limits of 1.5x
//    the live size after each mark-compact keep it near its live size for ~1% CPU of concurrent
//    marking (issue 13). Not allowed in NODE_OPTIONS.
//  --enable-experimental-regexp-engine, --enable-experimental-regexp-engine-on-excessive-backtracks:
//    matchers/regex.ts turns them on when it loads (why: there).
// Every flag is set here rather than with setFlagsFromString at run time: V8's code cache is keyed by
// the flags, so a module compiled after such a change had its entry, written by warm-compile-cache.js
// with the change at another point, rejected. An ADS sidecar compiled 135 of its modules again at
// every start (NODE_DEBUG_NATIVE=COMPILE_CACHE; 20 with only the regexp flags still set at run time;
// none with all four here).
// A flag given on the command line wins.
export const V8_FLAGS = [
  '--concurrent-marking-max-worker-num=1', '--heap-growing-percent=50',
  '--enable-experimental-regexp-engine', '--enable-experimental-regexp-engine-on-excessive-backtracks',
];

export function startWithV8Flags() {
  const given = (name) => process.execArgv.some((a) => a === name || a.startsWith(`${name}=`));
  const missing = V8_FLAGS.filter((f) => !given(f.split('=')[0]));
  if (missing.length === 0 || typeof process.execve !== 'function') return;
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], process.env);
}
