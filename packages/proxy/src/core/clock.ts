/**
 * Wall-clock milliseconds from a performance.now() reading: Date.now() costs a
 * runtime call in optimised code, and the hot path has a monotonic reading in
 * hand already. The offset between the two clocks is taken again once a second,
 * so a stepped system clock shows within a second.
 */
let offset = Date.now() - performance.now();
let synced = performance.now();

export function wallClockMs(perfNow: number): number {
  if (perfNow - synced > 1000) {
    synced = perfNow;
    offset = Date.now() - perfNow;
  }
  return offset + perfNow;
}
