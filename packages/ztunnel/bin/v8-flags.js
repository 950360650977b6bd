// The V8 flags every skua-ztunnel process runs with, given from V8's start (the bin restarts itself
// with any that are missing: process.execve, same pid, nothing else ran yet). They are part of the
// key of Node's compile cache too (a module compiled under other flags is compiled again, with type
// stripping's compiler), so warm-compile-cache.js runs under the same ones.
//  --max-semi-space-size=4: V8's young generation capped at 2 x 4 MB, as the proxy image caps it. By
//    default V8 sizes it from the machine's memory (up to 2 x 64 MB on a 24 GiB node) and never gives
//    it back: an idle in-pod ztunnel held 64 MB of new space after start-up, 128 MB after a burst of
//    connections (RSS 147 → 284 MB). Small, it also spares the relay its mark-compacts: a tunnel's
//    buffers die young, freed by a scavenge, instead of piling up as external memory until V8 runs a
//    full GC for them (one stream: 14 → 2 mark-compacts per GiB, bench/tools/hbone-loop.ts).
//  --heap-growing-percent=50: the old generation's next limit 1.5x its live size after each
//    mark-compact instead of V8's 2-4x, as skua-proxy sets it (not allowed in NODE_OPTIONS).
//  --enable-experimental-regexp-engine, --enable-experimental-regexp-engine-on-excessive-backtracks:
//    the proxy's matchers/regex.ts (loaded with the policy code) turns them on when it loads. V8's
//    code cache is keyed by the flags, so set at run time they made 35 of the entries
//    warm-compile-cache.js wrote, main.ts's first, be rejected at a start and compiled again (another
//    import order: NODE_DEBUG_NATIVE=COMPILE_CACHE). From V8's start they are the same for every module.
// A flag given on the command line (or the semi-space size in NODE_OPTIONS) wins.
const FLAGS = [
  '--max-semi-space-size=4', '--heap-growing-percent=50',
  '--enable-experimental-regexp-engine', '--enable-experimental-regexp-engine-on-excessive-backtracks',
];

export function restartWithV8Flags() {
  // By exact name: --enable-experimental-regexp-engine is a prefix of the other regexp flag.
  const named = (name) => (a) => a === name || a.startsWith(`${name}=`);
  const given = (name) => process.execArgv.some(named(name)) || (process.env.NODE_OPTIONS ?? '').split(/\s+/).some(named(name));
  const missing = FLAGS.filter((f) => !given(f.split('=')[0]));
  if (missing.length > 0 && typeof process.execve === 'function') {
    process.execve(process.execPath, [process.execPath, ...missing, ...process.execArgv, ...process.argv.slice(1)], process.env);
  }
}
