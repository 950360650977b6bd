/** A broken invariant: the fuzzer reports it as a crash (any thrown error is one). */
export class InvariantError extends Error {
  constructor(message: string, detail: unknown) {
    super(`${message}: ${safeJson(detail)}`);
    this.name = 'InvariantError';
  }
}

export function fail(message: string, detail: unknown): never {
  throw new InvariantError(message, detail);
}

function safeJson(v: unknown): string {
  try {
    return JSON.stringify(v, (_k, x: unknown) => (typeof x === 'bigint' ? String(x) : x))?.slice(0, 2000) ?? String(v);
  } catch {
    return String(v);
  }
}
