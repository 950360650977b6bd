import type { Msg } from '../config/fields.ts';
import { ConfigError } from '../core/errors.ts';
import { unwrapAny } from '../config/typed-config.ts';
import { compileXdsMatcher, unsupportedInput, type MatchInput, type MatchTree } from '../matchers/xds-matcher.ts';
import { isLocalConnection, type ConnectionFacts } from './filter-chain-match.ts';

/**
 * Listener.filter_chain_matcher: the unified matcher API selecting a filter chain by name (the
 * action is a google.protobuf.StringValue naming a chain). Istiod's waypoint `main_internal`
 * listener uses it: DestinationIPInput → IPMatcher → DestinationPortInput / ApplicationProtocolInput.
 * A named chain that does not exist makes the match fail: the default chain serves, else the
 * connection is closed (Envoy's documented behaviour). filter_chain_match is then ignored.
 */

const NET = 'type.googleapis.com/envoy.extensions.matching.common_inputs.network.v3.';
const STRING_VALUE = 'type.googleapis.com/google.protobuf.StringValue';

/** The chain selector a listener uses, for both filter_chain_match and filter_chain_matcher. */
export interface ChainSelector<T> {
  select(facts: ConnectionFacts): T | undefined;
}

/** A chain name the matcher picked that the listener does not have: the match fails. */
const MISSING: unique symbol = Symbol('missing filter chain');

class MatcherTreeSelector<T> implements ChainSelector<T> {
  readonly #tree: MatchTree<ConnectionFacts, T | typeof MISSING>;
  readonly #fallback: T | undefined;
  constructor(tree: MatchTree<ConnectionFacts, T | typeof MISSING>, fallback: T | undefined) {
    this.#tree = tree;
    this.#fallback = fallback;
  }
  select(facts: ConnectionFacts): T | undefined {
    const hit = this.#tree(facts);
    return hit === undefined || hit === MISSING ? this.#fallback : hit;
  }
}

export function compileChainMatcherTree<T>(m: Msg, chains: ReadonlyMap<string, T>, fallback: T | undefined): ChainSelector<T> {
  const tree = compileXdsMatcher<ConnectionFacts, T | typeof MISSING>(m, {
    input: networkInput,
    action: (a) => {
      const typed = unwrapAny(a.requiredMsg('typed_config'));
      if (typed.url !== STRING_VALUE) throw a.error('typed_config', `a filter chain matcher's action must be a ${STRING_VALUE} naming a filter chain, got ${typed.url}`);
      return chains.get(typed.msg.str('value')) ?? MISSING;
    },
  });
  return new MatcherTreeSelector(tree, fallback);
}

/** The network inputs (envoy.extensions.matching.common_inputs.network.v3) a listener can match on. */
function networkInput(m: Msg): MatchInput<ConnectionFacts> {
  const tc = m.msg('typed_config');
  const url = tc ? unwrapAny(tc).url : '';
  if (!url.startsWith(NET)) throw unsupportedInput(m, 'a filter chain matcher');
  switch (url.slice(NET.length)) {
    case 'DestinationIPInput': return destinationIp;
    case 'DestinationPortInput': return destinationPort;
    case 'SourceIPInput': return sourceIp;
    case 'DirectSourceIPInput': return directSourceIp;
    case 'SourcePortInput': return sourcePort;
    case 'SourceTypeInput': return sourceType;
    case 'ServerNameInput': return serverName;
    case 'TransportProtocolInput': return transportProtocol;
    case 'ApplicationProtocolInput': return applicationProtocols;
  }
  throw unsupportedInput(m, 'a filter chain matcher');
}

function ipOrNone(ip: string): string | undefined { return ip === '' ? undefined : ip; }
function destinationIp(f: ConnectionFacts): string | undefined { return ipOrNone(f.destinationIp); }
function sourceIp(f: ConnectionFacts): string | undefined { return ipOrNone(f.sourceIp); }
function directSourceIp(f: ConnectionFacts): string | undefined { return ipOrNone(f.directSourceIp); }
function destinationPort(f: ConnectionFacts): string | undefined { return f.destinationPort ? String(f.destinationPort) : undefined; }
function sourcePort(f: ConnectionFacts): string | undefined { return f.sourcePort ? String(f.sourcePort) : undefined; }
function serverName(f: ConnectionFacts): string | undefined { return f.serverName || undefined; }
function transportProtocol(f: ConnectionFacts): string | undefined { return f.transportProtocol || undefined; }

/** Envoy: "local" for a pipe, loopback or same-IP peer; otherwise no value. */
function sourceType(f: ConnectionFacts): string | undefined {
  return isLocalConnection(f) ? 'local' : undefined;
}

/** Envoy joins the protocols as `'h2','http/1.1'` (each single-quoted, comma-separated). */
function applicationProtocols(f: ConnectionFacts): string | undefined {
  const p = f.applicationProtocols;
  if (p.length === 0) return undefined;
  if (p.length === 1) return `'${p[0]}'`;
  return p.map((x) => `'${x}'`).join(',');
}

/** Filter chain names must be unique (and present) when the matcher names them. */
export function chainsByName<T>(names: readonly string[], values: readonly T[], path: (i: number) => string): Map<string, T> {
  const out = new Map<string, T>();
  names.forEach((name, i) => {
    if (name === '') throw new ConfigError(path(i), 'filter chains must be named when filter_chain_matcher is used');
    if (out.has(name)) throw new ConfigError(path(i), `filter chain name ${JSON.stringify(name)} is not unique`);
    out.set(name, values[i]);
  });
  return out;
}
