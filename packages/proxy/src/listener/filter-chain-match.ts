import type { Msg } from '../config/fields.ts';
import { ConfigError } from '../core/errors.ts';
import { CidrTable, isIp, isLoopback, parseCidrRange, sameIp, type CidrRange } from '../core/cidr.ts';

/**
 * Envoy's FilterChainMatch (envoy.config.listener.v3), compiled once per listener into a tree
 * with one level per criterion, in Envoy's order:
 *
 *   destination_port → prefix_ranges → server_names → transport_protocol → application_protocols
 *   → direct_source_prefix_ranges → source_type → source_prefix_ranges → source_ports
 *
 * At each level the most specific key that matches the connection wins (exact port, longest
 * prefix, exact name then longest `*.` wildcard, ...), else the branch of chains that left the
 * field empty. Selection never backtracks: once a level picked a branch and a later level finds
 * nothing there, the result is the default chain (Envoy's FilterChainManagerImpl does the same).
 */

export interface ConnectionFacts {
  destinationIp: string;
  destinationPort: number;
  directSourceIp: string;
  sourceIp: string;
  sourcePort: number;
  /** '' when none; lower case (the tls inspector folds it, as Envoy does). */
  serverName: string;
  /** 'raw_buffer' | 'tls'; '' (no inspector ran) counts as 'raw_buffer', Envoy's default. */
  transportProtocol: string;
  /** ALPN in client order, or http_inspector's 'http/1.1' / 'h2c'. */
  applicationProtocols: readonly string[];
}

export interface FilterChainEntry<T> {
  match: Msg | undefined;
  value: T;
  /** FilterChain.name, used in errors. */
  name?: string;
}

const SOURCE_TYPES = ['ANY', 'SAME_IP_OR_LOOPBACK', 'EXTERNAL'] as const;
const FIELDS = [
  'destination_port', 'prefix_ranges', 'server_names', 'transport_protocol', 'application_protocols',
  'direct_source_prefix_ranges', 'source_type', 'source_prefix_ranges', 'source_ports',
  'address_suffix', 'suffix_len',
];
const LEVELS = 9;
const L_DPORT = 0, L_DIP = 1, L_SNI = 2, L_TRANSPORT = 3, L_ALPN = 4, L_DIRECT = 5, L_STYPE = 6, L_SIP = 7, L_SPORT = 8;
/** Envoy matches non-IP peers (unix sockets) as this address: only catch-all ranges contain it. */
const FAKE_IP = '255.255.255.255';

type Key = string | number;
/** The "field left empty" key of every level: '' for strings, 0 for ports, 'ANY' for source_type. */
function anyKey(level: number): Key {
  return level === L_DPORT || level === L_SPORT ? 0 : level === L_STYPE ? 'ANY' : '';
}

interface ChainInfo {
  readonly label: string;
  readonly path: string;
  /** Sorted keys per level: equal signatures mean identical matching rules. */
  readonly sig: string;
}

class Leaf<T> {
  readonly value: T;
  readonly chain: ChainInfo;
  constructor(value: T, chain: ChainInfo) {
    this.value = value;
    this.chain = chain;
  }
}

interface Node<T> {
  pick(f: ConnectionFacts): Step<T> | undefined;
}
type Step<T> = Node<T> | Leaf<T>;

export class FilterChainMatcher<T> {
  readonly #root: Step<T> | undefined;
  readonly #fallback: T | undefined;

  constructor(root: Step<T> | undefined, fallback: T | undefined) {
    this.#root = root;
    this.#fallback = fallback;
  }

  /** The chain for this connection, else the default chain (undefined: close the connection). */
  select(facts: ConnectionFacts): T | undefined {
    let step = this.#root;
    while (step !== undefined && !(step instanceof Leaf)) step = step.pick(facts);
    return step === undefined ? this.#fallback : step.value;
  }
}

export function compileFilterChainMatcher<T>(
  chains: ReadonlyArray<FilterChainEntry<T>>,
  defaultChain: T | undefined,
): FilterChainMatcher<T> {
  const ranges = new Map<string, CidrRange>();
  const root: BuildNode<T> = new Map();
  chains.forEach((chain, i) => {
    const keys = chainKeys(chain.match, ranges);
    const label = chain.name ? `'${chain.name}' (filter_chains[${i}])` : `filter_chains[${i}]`;
    const sig = JSON.stringify(keys.map((k) => [...k].sort()));
    const info: ChainInfo = { label, path: chain.match?.path ?? `filter_chains[${i}]`, sig };
    insert(root, 0, keys, new Leaf(chain.value, info));
  });
  return new FilterChainMatcher(chains.length ? compile(root, 0, ranges) : undefined, defaultChain);
}

// ---- config: one FilterChainMatch → its keys per level ----

function chainKeys(m: Msg | undefined, ranges: Map<string, CidrRange>): Key[][] {
  const keys: Key[][] = [];
  for (let l = 0; l < LEVELS; l++) keys.push([anyKey(l)]);
  if (!m) return keys;
  m.onlyFields(FIELDS);
  if (m.str('address_suffix') !== '' || m.has('suffix_len')) {
    throw m.error(m.has('suffix_len') ? 'suffix_len' : 'address_suffix', 'is not supported (Envoy rejects it too)');
  }
  if (m.has('destination_port')) keys[L_DPORT] = [port(m.num('destination_port'), m.field('destination_port'))];
  keys[L_DIP] = cidrKeys(m, 'prefix_ranges', ranges);
  const names = m.strList('server_names').map((name, i) => {
    // Envoy: only a leading `*.` is a wildcard; values like `*w.example.com` are refused.
    if (name.includes('*') && !name.startsWith('*.')) {
      throw new ConfigError(`${m.field('server_names')}[${i}]`, `partial wildcards are not supported: ${JSON.stringify(name)}`);
    }
    return asciiLower(name);
  });
  if (names.length) keys[L_SNI] = names;
  keys[L_TRANSPORT] = [m.str('transport_protocol')];
  const alpn = m.strList('application_protocols');
  if (alpn.length) keys[L_ALPN] = alpn;
  keys[L_DIRECT] = cidrKeys(m, 'direct_source_prefix_ranges', ranges);
  keys[L_STYPE] = [m.enumOf('source_type', SOURCE_TYPES)];
  keys[L_SIP] = cidrKeys(m, 'source_prefix_ranges', ranges);
  const ports = m.rawList('source_ports').map((p, i) => port(Number(p), `${m.field('source_ports')}[${i}]`));
  if (ports.length) keys[L_SPORT] = ports;
  return keys;
}

function cidrKeys(m: Msg, field: string, ranges: Map<string, CidrRange>): Key[] {
  const list = m.list(field);
  if (!list.length) return [''];
  return list.map((r) => {
    const range = parseCidrRange(r);
    ranges.set(range.text, range);
    return range.text;
  });
}

function port(v: number, path: string): number {
  if (!Number.isInteger(v) || v < 1 || v > 65535) throw new ConfigError(path, `must be a port in [1, 65535], got ${v}`);
  return v;
}

function asciiLower(s: string): string {
  return s.replace(/[A-Z]+/g, (u) => u.toLowerCase());
}

// ---- build: a tree of Maps keyed per level; the cross product of a chain's keys ends in leaves ----

type BuildNode<T> = Map<Key, BuildNode<T> | Leaf<T>>;

function insert<T>(node: BuildNode<T>, level: number, keys: Key[][], leaf: Leaf<T>): void {
  for (const key of keys[level]) {
    if (level === LEVELS - 1) {
      const prev = node.get(key);
      if (prev instanceof Leaf) throw conflict(prev.chain, leaf.chain);
      node.set(key, leaf);
      continue;
    }
    let child = node.get(key) as BuildNode<T> | undefined;
    if (!child) node.set(key, (child = new Map()));
    insert(child, level + 1, keys, leaf);
  }
}

function conflict(prev: ChainInfo, next: ChainInfo): ConfigError {
  if (prev === next) {
    return new ConfigError(next.path, `filter chain ${next.label} lists the same value twice: multiple filter chains with overlapping matching rules are defined`);
  }
  if (prev.sig === next.sig) {
    return new ConfigError(next.path, `filter chain ${next.label} has the same matching rules defined as ${prev.label}: multiple filter chains with the same matching rules are defined`);
  }
  return new ConfigError(next.path, `filter chain ${next.label} overlaps ${prev.label}: multiple filter chains with overlapping matching rules are defined`);
}

function compile<T>(node: BuildNode<T> | Leaf<T>, level: number, ranges: Map<string, CidrRange>): Step<T> {
  if (node instanceof Leaf) return node;
  const any = anyKey(level);
  // A level where every chain left the field empty decides nothing: skip it.
  if (node.size === 1 && node.has(any)) return compile(node.get(any)!, level + 1, ranges);
  const children = new Map<Key, Step<T>>();
  for (const [key, child] of node) children.set(key, compile(child, level + 1, ranges));
  const anyStep = children.get(any);
  children.delete(any);
  switch (level) {
    case L_DPORT: return new PortNode(children as Map<number, Step<T>>, anyStep, false);
    case L_SPORT: return new PortNode(children as Map<number, Step<T>>, anyStep, true);
    case L_DIP: case L_DIRECT: case L_SIP: {
      const table = new CidrTable<Step<T>>([...children].map(([k, s]) => [ranges.get(k as string)!, s] as const));
      return new CidrNode(table, anyStep, level);
    }
    case L_SNI: return new ServerNameNode(children as Map<string, Step<T>>, anyStep);
    case L_TRANSPORT: return new TransportNode(children as Map<string, Step<T>>, anyStep);
    case L_ALPN: return new AlpnNode(children as Map<string, Step<T>>, anyStep);
    default: return new SourceTypeNode(children.get('SAME_IP_OR_LOOPBACK'), children.get('EXTERNAL'), anyStep);
  }
}

// ---- match time: one small node class per level kind; no allocation ----

class PortNode<T> implements Node<T> {
  readonly byPort: Map<number, Step<T>>;
  readonly any: Step<T> | undefined;
  readonly source: boolean;
  constructor(byPort: Map<number, Step<T>>, any: Step<T> | undefined, source: boolean) {
    this.byPort = byPort;
    this.any = any;
    this.source = source;
  }
  pick(f: ConnectionFacts): Step<T> | undefined {
    return this.byPort.get(this.source ? f.sourcePort : f.destinationPort) ?? this.any;
  }
}

class CidrNode<T> implements Node<T> {
  readonly table: CidrTable<Step<T>>;
  readonly any: Step<T> | undefined;
  readonly level: number;
  constructor(table: CidrTable<Step<T>>, any: Step<T> | undefined, level: number) {
    this.table = table;
    this.any = any;
    this.level = level;
  }
  pick(f: ConnectionFacts): Step<T> | undefined {
    const ip = this.level === L_DIP ? f.destinationIp : this.level === L_DIRECT ? f.directSourceIp : f.sourceIp;
    // An explicit range (even 0.0.0.0/0) is preferred to "no prefix_ranges"; Envoy leaves that tie undefined.
    const hit = this.table.lookup(ip) ?? (isIp(ip) ? undefined : this.table.lookup(FAKE_IP));
    return hit ?? this.any;
  }
}

class ServerNameNode<T> implements Node<T> {
  readonly exact: Map<string, Step<T>>;
  /** `*.example.com` as `.example.com`, longest first, so the most specific wildcard wins. */
  readonly suffixes: string[];
  readonly wild: Step<T>[];
  readonly any: Step<T> | undefined;
  constructor(names: Map<string, Step<T>>, any: Step<T> | undefined) {
    this.exact = new Map();
    const wild: [string, Step<T>][] = [];
    for (const [name, step] of names) {
      if (name.startsWith('*.')) wild.push([name.slice(1), step]);
      else this.exact.set(name, step);
    }
    wild.sort((a, b) => b[0].length - a[0].length);
    this.suffixes = wild.map((w) => w[0]);
    this.wild = wild.map((w) => w[1]);
    this.any = any;
  }
  pick(f: ConnectionFacts): Step<T> | undefined {
    const name = f.serverName;
    if (name === '') return this.any;
    const hit = this.exact.get(name);
    if (hit !== undefined) return hit;
    // Envoy tries the suffixes starting at each '.' after the first character; `*.` alone never matches.
    for (let i = 0; i < this.suffixes.length; i++) {
      const s = this.suffixes[i];
      if (s.length > 1 && name.length > s.length && name.endsWith(s)) return this.wild[i];
    }
    return this.any;
  }
}

class TransportNode<T> implements Node<T> {
  readonly byName: Map<string, Step<T>>;
  readonly any: Step<T> | undefined;
  constructor(byName: Map<string, Step<T>>, any: Step<T> | undefined) {
    this.byName = byName;
    this.any = any;
  }
  pick(f: ConnectionFacts): Step<T> | undefined {
    return this.byName.get(f.transportProtocol || 'raw_buffer') ?? this.any;
  }
}

class AlpnNode<T> implements Node<T> {
  readonly byName: Map<string, Step<T>>;
  readonly any: Step<T> | undefined;
  constructor(byName: Map<string, Step<T>>, any: Step<T> | undefined) {
    this.byName = byName;
    this.any = any;
  }
  pick(f: ConnectionFacts): Step<T> | undefined {
    // The client's first protocol that any chain names decides, as in Envoy.
    const protos = f.applicationProtocols;
    for (let i = 0; i < protos.length; i++) {
      const hit = this.byName.get(protos[i]);
      if (hit !== undefined) return hit;
    }
    return this.any;
  }
}

class SourceTypeNode<T> implements Node<T> {
  readonly local: Step<T> | undefined;
  readonly external: Step<T> | undefined;
  readonly any: Step<T> | undefined;
  constructor(local: Step<T> | undefined, external: Step<T> | undefined, any: Step<T> | undefined) {
    this.local = local;
    this.external = external;
    this.any = any;
  }
  pick(f: ConnectionFacts): Step<T> | undefined {
    if (isLocalConnection(f)) return this.local ?? this.any;
    return this.external ?? this.any;
  }
}

/** Envoy's isSameIpOrLoopback: a non-IP peer (pipe), a loopback peer, or peer IP == local IP. */
export function isLocalConnection(f: ConnectionFacts): boolean {
  return !isIp(f.sourceIp) || isLoopback(f.sourceIp) || sameIp(f.sourceIp, f.destinationIp);
}
