// V8 flags skua-proxy runs with from V8's start: the bin restarts itself with any that are missing
// (process.execve: same pid, nothing else ran yet). They are part of the key of Node's compile cache
// (a module compiled under other flags is compiled again, with type stripping's compiler), so
// warm-compile-cache.js runs under them too.
//  --concurrent-marking-max-worker-num=1: one helper thread for V8's concurrent marking (default: as
//    many as Node's platform pool, 4). A sidecar gets a core or two; on 2 cores the helpers marking a
//    200 MB heap took the CPU from the thread serving traffic: a 20,000-cluster SotW push (bench
//    xds-scale) had p99 1.75-2.24x idle with the default, 1.61-1.72x with one helper (issue 16). V8
//    reads it when marking starts its jobs: setFlagsFromString at run time changed nothing.
// A flag given on the command line wins.
const FLAGS = ['--concurrent-marking-max-worker-num=1'];

export function startWithV8Flags() {
  const missing = FLAGS.filter((f) => !process.execArgv.some((a) => a.startsWith(f.slice(0, f.indexOf('=')))));
  if (missing.length === 0 || typeof process.execve !== 'function') return;
  process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], process.env);
}
