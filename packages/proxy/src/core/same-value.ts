/**
 * One frozen copy of each distinct small config value that thousands of resources repeat (istiod
 * gives every outbound cluster the same ALPN list, SDS names, TLS parameters): config objects are
 * read, never changed, so they can share it. Bounded: past `MAX` distinct values a value is kept as
 * given (frozen all the same).
 */
const MAX = 4096;
const seen = new Map<string, unknown>();

/** The shared copy of `value`, a JSON-able list or plain object; `key` is its kind ('alpn', ...). */
export function sameValue<T extends object>(key: string, value: T): Readonly<T> {
  const k = `${key}\u0000${JSON.stringify(value)}`;
  const kept = seen.get(k) as Readonly<T> | undefined;
  if (kept) return kept;
  const frozen = Object.freeze(value);
  if (seen.size < MAX) seen.set(k, frozen);
  return frozen;
}
