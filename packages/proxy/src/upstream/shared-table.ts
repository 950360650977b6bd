/**
 * An open-addressed table of Int32 words in shared memory, keyed by name, for state every thread of one
 * proxy (--concurrency N) must see alike: circuit-breaker counts, outlier-detection counters and
 * ejections. The main thread makes the SharedArrayBuffer before the workers start and hands it to each.
 * An entry is a 3-word header (state, two 32-bit FNV-1a hashes of the name) and `words` data words,
 * changed with Atomics. It is claimed once, by whichever thread first asks for that name, and kept.
 */

const STATE = 0, HASH_A = 1, HASH_B = 2, HEADER = 3;
const EMPTY = 0, CLAIMING = 1, READY = 2;
/** Slots probed before a name is given up on (tables are sized well above the names they hold). */
const MAX_PROBES = 64;

/** Memory for `slots` entries of `words` data words each. */
export function newSharedTableMemory(slots: number, words: number): SharedArrayBuffer {
  return new SharedArrayBuffer(slots * (HEADER + words) * Int32Array.BYTES_PER_ELEMENT);
}

function fnv1a(s: string, seed: number): number {
  let h = seed;
  for (let i = 0; i < s.length; i++) { h ^= s.charCodeAt(i); h = Math.imul(h, 16777619); }
  // 0 marks an empty slot's hash: never produce it.
  return h === 0 ? 1 : h;
}

export class SharedNameTable {
  /** Every entry's words: `cells[entry(name) + i]` is data word i of that name. */
  readonly cells: Int32Array;
  private readonly stride: number;
  private readonly slots: number;

  constructor(memory: SharedArrayBuffer, words: number) {
    this.cells = new Int32Array(memory);
    this.stride = HEADER + words;
    this.slots = this.cells.length / this.stride;
  }

  /** Index of the first data word of `name`'s entry (claimed now if new), or -1 when the table is full. */
  entry(name: string): number {
    const t = this.cells;
    const a = fnv1a(name, 0x811c9dc5), b = fnv1a(name, 0x01000193);
    for (let probe = 0, i = (a >>> 0) % this.slots; probe < MAX_PROBES; probe++, i = (i + 1) % this.slots) {
      const at = i * this.stride;
      let state = Atomics.load(t, at + STATE);
      if (state === EMPTY && Atomics.compareExchange(t, at + STATE, EMPTY, CLAIMING) === EMPTY) {
        Atomics.store(t, at + HASH_A, a);
        Atomics.store(t, at + HASH_B, b);
        Atomics.store(t, at + STATE, READY);
        Atomics.notify(t, at + STATE);
        return at + HEADER;
      }
      // Another thread is writing this slot's name: it takes microseconds.
      while ((state = Atomics.load(t, at + STATE)) === CLAIMING) Atomics.wait(t, at + STATE, CLAIMING, 5);
      if (Atomics.load(t, at + HASH_A) === a && Atomics.load(t, at + HASH_B) === b) return at + HEADER;
    }
    return -1;
  }
}
