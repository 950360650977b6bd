/** Progress lines prefixed with the time elapsed since the run started. */

let startedAt = performance.now();
let quiet = false;

/** Stop printing progress (the run is being torn down). */
export function silence(): void {
  quiet = true;
}

export function resetClock(): void {
  startedAt = performance.now();
}

export function elapsedSeconds(): number {
  return (performance.now() - startedAt) / 1000;
}

function stamp(): string {
  const s = elapsedSeconds();
  const m = Math.floor(s / 60);
  const rest = (s - m * 60).toFixed(1).padStart(4, '0');
  return `[${String(m).padStart(2, '0')}:${rest}]`;
}

export function progress(scope: string, message: string): void {
  if (quiet) return;
  process.stdout.write(`${stamp()} ${scope.padEnd(12)} ${message}\n`);
}

export function warn(message: string): void {
  process.stderr.write(`${stamp()} warning: ${message}\n`);
}
