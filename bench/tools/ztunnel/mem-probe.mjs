// Preloaded into a profiled process (NODE_OPTIONS=--import=<this file>; plain JS so that loading it
// never needs type stripping's compiler): on SIGUSR2 it writes its memory as V8 and the kernel see it
// to $MEM_PROBE_DIR/<pid>.json — process.memoryUsage(), V8's heap spaces, /proc/self/smaps_rollup;
// with MEM_PROBE_SNAPSHOT=1 also a heap snapshot, <pid>-<n>.heapsnapshot (before the numbers), with
// MEM_PROBE_SMAPS=1 a copy of /proc/self/smaps.
import { readFileSync, writeFileSync } from 'node:fs';
import { getHeapSpaceStatistics, setFlagsFromString, writeHeapSnapshot } from 'node:v8';

// V8 flags NODE_OPTIONS does not take (--trace-gc, --heap-growing-percent=N), set at start.
if (process.env.MEM_PROBE_V8_FLAGS) setFlagsFromString(process.env.MEM_PROBE_V8_FLAGS);
const dir = process.env.MEM_PROBE_DIR ?? '/tmp';
const mb = (n) => Math.round((n / 1048576) * 10) / 10;
let snapshots = 0;
process.on('SIGUSR2', () => {
  if (process.env.MEM_PROBE_SNAPSHOT === '1') writeHeapSnapshot(`${dir}/${process.pid}-${++snapshots}.heapsnapshot`);
  const rollup = readFileSync('/proc/self/smaps_rollup', 'utf8');
  if (process.env.MEM_PROBE_SMAPS === '1') writeFileSync(`${dir}/${process.pid}-${Date.now()}.smaps`, readFileSync('/proc/self/smaps'));
  const kb = (field) => Number(new RegExp(`^${field}:\\s+(\\d+)`, 'm').exec(rollup)?.[1] ?? 0) / 1024;
  const m = process.memoryUsage();
  const spaces = {};
  for (const s of getHeapSpaceStatistics()) if (s.space_size > 0) spaces[s.space_name] = { size: mb(s.space_size), used: mb(s.space_used_size) };
  writeFileSync(`${dir}/${process.pid}.json`, JSON.stringify({
    rss: mb(m.rss), anon: Math.round(kb('Anonymous') * 10) / 10, heapTotal: mb(m.heapTotal), heapUsed: mb(m.heapUsed),
    external: mb(m.external), arrayBuffers: mb(m.arrayBuffers), spaces,
  }));
});
