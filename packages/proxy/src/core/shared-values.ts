/**
 * One copy of what thousands of config resources repeat (istiod gives every outbound cluster the
 * same ALPN list, SDS names and TLS parameters, every route the same empty lists, every endpoint the
 * same locality names): config objects are read, never changed, so they can share it. Bounded: past
 * `MAX` distinct values a value is kept as given.
 */
const MAX = 4096;

/** The empty list every config part without entries shares (frozen). */
export const EMPTY_LIST: readonly never[] = Object.freeze([]);

const values = new Map<string, unknown>();

/** The shared, frozen copy of `value`, a JSON-able list or plain object; `kind` names it ('alpn', ...). */
export function sharedValue<T extends object>(kind: string, value: T): Readonly<T> {
  const k = `${kind}\u0000${JSON.stringify(value)}`;
  const kept = values.get(k) as Readonly<T> | undefined;
  if (kept) return kept;
  const frozen = Object.freeze(value);
  if (values.size < MAX) values.set(k, frozen);
  return frozen;
}

const strings = new Map<string, string>();

/** One string per distinct text (each decoded resource has its own copy of a type URL or a zone name). */
export function sharedString(s: string): string {
  if (s === '') return s;
  const kept = strings.get(s);
  if (kept !== undefined) return kept;
  if (strings.size < MAX) strings.set(s, s);
  return s;
}
