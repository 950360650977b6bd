import type { Msg } from './fields.ts';

const DENOMINATORS = { HUNDRED: 100, TEN_THOUSAND: 10_000, MILLION: 1_000_000 } as const;
const NAMES = ['HUNDRED', 'TEN_THOUSAND', 'MILLION'] as const;

/** envoy.type.v3.FractionalPercent as numerator / denominator. */
export interface FractionalPercent {
  readonly numerator: number;
  readonly denominator: number;
}

export function readFractionalPercent(m: Msg): FractionalPercent {
  return { numerator: m.num('numerator'), denominator: DENOMINATORS[m.enumOf('denominator', NAMES)] };
}

/** A FractionalPercent as a probability in [0, 1]; `fallback` when the message is absent. */
export function probability(m: Msg | undefined, fallback: number): number {
  if (!m) return fallback;
  const f = readFractionalPercent(m);
  return Math.min(1, f.numerator / f.denominator);
}
