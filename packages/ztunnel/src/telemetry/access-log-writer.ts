/**
 * Access log lines to stdout in batches: at most every FLUSH_MS, or once PENDING_BYTES are waiting.
 * Node writes stdout to a pipe or a file synchronously, one write(2) per call, and a write to a pipe
 * wakes its reader (the container runtime's logger): one line per connection cost 8-13% of a
 * ztunnel's CPU at ~700 new tunnels/s (bench/tools/ztunnel-profile.ts connrate under --cpu-prof;
 * a batch per event-loop turn did not help: each turn had one line). Rust ztunnel's log writer
 * is buffered too. Lines keep their order; what is pending when the process exits is written then.
 */
const FLUSH_MS = 100;
const PENDING_BYTES = 64 * 1024;

const pending: string[] = [];
let pendingBytes = 0;
let timer: NodeJS.Timeout | undefined;
let hooked = false;

function flush(): void {
  if (timer) { clearTimeout(timer); timer = undefined; }
  if (pending.length === 0) return;
  const text = pending.join('');
  pending.length = 0;
  pendingBytes = 0;
  process.stdout.write(text);
}

export function writeAccessLogLine(line: string): void {
  pending.push(`${line}\n`);
  pendingBytes += line.length + 1;
  if (pendingBytes >= PENDING_BYTES) { flush(); return; }
  if (timer) return;
  timer = setTimeout(flush, FLUSH_MS);
  timer.unref();
  if (!hooked) { hooked = true; process.on('exit', flush); }
}
