import type { Msg } from '../config/fields.ts';
import { readAddress, type SocketAddress } from '../config/address.ts';
import { compileDownstreamTls, DOWNSTREAM_TLS, type DownstreamTls } from '../tls/context.ts';
import { compileFilterChainMatcher } from './filter-chain-match.ts';
import { chainsByName, compileChainMatcherTree, type ChainSelector } from './matcher-tree.ts';
import { compileFilterDisabled, NEVER_DISABLED, type DisabledPredicate } from './filter-disabled.ts';
import { NETWORK_FILTERS_BY_NAME, NETWORK_FILTERS_BY_URL } from '../filters/network/registry.ts';
import type { NetworkFilterConfig } from './network-filter.ts';
import { describeTypedConfig, readFilterConfig, readTypedConfig } from '../config/typed-config.ts';
import { networkTerminal, networkTerminalNames, type TerminalConfig } from './terminal.ts';

const TLS_INSPECTOR = 'type.googleapis.com/envoy.extensions.filters.listener.tls_inspector.v3.TlsInspector';
const HTTP_INSPECTOR = 'type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector';
const ORIGINAL_DST = 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst';
/** Istio's listener filter that restores the destination an internal upstream passed along. */
export const SET_INTERNAL_DST = 'type.googleapis.com/istio.set_internal_dst_address.v1.Config';
const LISTENER_FILTER_NAMES: Record<string, string> = {
  'envoy.filters.listener.tls_inspector': TLS_INSPECTOR,
  'envoy.filters.listener.http_inspector': HTTP_INSPECTOR,
  'envoy.filters.listener.original_dst': ORIGINAL_DST,
  'istio.set_internal_dst_address': SET_INTERNAL_DST,
};
const RAW_BUFFER = 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer';


export interface FilterChainConfig {
  readonly name: string;
  readonly tls: DownstreamTls | undefined;
  /** The read filters before the terminal, in order. */
  readonly readFilters: readonly NetworkFilterConfig[];
  /** The registered terminal the chain ends in (listener/terminal.ts). */
  readonly terminal: TerminalConfig;
}

export interface ListenerConfig {
  readonly name: string;
  readonly address: SocketAddress;
  readonly bindToPort: boolean;
  readonly useOriginalDst: boolean;
  readonly transparent: boolean;
  /** The inspectors, each with its filter_disabled predicate (undefined = not configured). */
  readonly tlsInspector: DisabledPredicate | undefined;
  readonly httpInspector: DisabledPredicate | undefined;
  readonly originalDst: boolean;
  /** istio.set_internal_dst_address: destination from the `tunnel` metadata or the CONNECT authority filter state. */
  readonly setInternalDst: boolean;
  /** internal_listener: no socket; reachable in-process by name (envoy_internal_address). */
  readonly internal: boolean;
  readonly listenerFiltersTimeoutMs: number;
  readonly continueOnListenerFiltersTimeout: boolean;
  /** filter_chain_match, or filter_chain_matcher when set (then the chains' matches are ignored, as in Envoy). */
  readonly chains: ChainSelector<FilterChainConfig>;
  readonly chainCount: number;
  /** Some chain terminates TLS (the listener keeps ssl.* stats). */
  readonly tls: boolean;
  readonly statPrefix: string;
  /** traffic_direction: Istio's telemetry filters tell inbound (server) from outbound (client) by it. */
  readonly direction: 'UNSPECIFIED' | 'INBOUND' | 'OUTBOUND';
  readonly source: Record<string, unknown>;
}

export function compileListener(m: Msg, index: number): ListenerConfig {
  for (const f of ['api_listener', 'udp_listener_config', 'additional_addresses', 'access_log', 'connection_balance_config']) {
    if (m.has(f)) throw m.error(f, 'is not supported yet');
  }
  const name = m.str('name') || `listener_${index}`;
  const internal = m.has('internal_listener');
  const address = internal ? readInternalListenerAddress(m, name) : readAddress(m.requiredMsg('address'));
  let tlsInspector: DisabledPredicate | undefined, httpInspector: DisabledPredicate | undefined, originalDst = false, setInternalDst = false;
  for (const lf of m.list('listener_filters')) {
    const typed = readTypedConfig(lf);
    const tc = typed.msg;
    const url = typed.url || LISTENER_FILTER_NAMES[lf.str('name')] || '';
    const disabled = lf.has('filter_disabled') ? compileFilterDisabled(lf.requiredMsg('filter_disabled')) : NEVER_DISABLED;
    if (url === TLS_INSPECTOR) tlsInspector = disabled;
    else if (url === HTTP_INSPECTOR) httpInspector = disabled;
    else if (url === ORIGINAL_DST) {
      if (lf.has('filter_disabled')) throw lf.error('filter_disabled', 'is not supported on original_dst');
      originalDst = true;
    } else if (url === SET_INTERNAL_DST) {
      if (lf.has('filter_disabled')) throw lf.error('filter_disabled', 'is not supported on set_internal_dst_address');
      tc?.onlyFields(typed.wrapper ? [] : ['@type']);
      setInternalDst = true;
    }
    else throw lf.error(tc ? 'typed_config' : 'name', `unsupported listener filter ${describeTypedConfig(typed, lf.str('name'))}`);
  }
  const chains = m.list('filter_chains');
  const dfc = m.msg('default_filter_chain');
  if (chains.length === 0 && !dfc) throw m.error('filter_chains', 'at least one filter chain is required');
  const compiled = chains.map((c) => ({ match: c.msg('filter_chain_match'), value: compileChain(c), name: c.str('name') }));
  const defaultChain = dfc ? compileChain(dfc) : undefined;
  const matcher = m.msg('filter_chain_matcher');
  const selector = matcher
    ? compileChainMatcherTree(matcher, chainsByName(compiled.map((c) => c.name), compiled.map((c) => c.value), (i) => `${m.field('filter_chains')}[${i}].name`), defaultChain)
    : compileFilterChainMatcher(compiled, defaultChain);
  return {
    name,
    address,
    bindToPort: !internal && m.bool('bind_to_port', true),
    useOriginalDst: m.bool('use_original_dst'),
    transparent: m.bool('transparent'),
    tlsInspector,
    httpInspector,
    originalDst,
    setInternalDst,
    internal,
    listenerFiltersTimeoutMs: m.durationMs('listener_filters_timeout', 15_000),
    continueOnListenerFiltersTimeout: m.bool('continue_on_listener_filters_timeout'),
    chains: selector,
    chainCount: chains.length + (dfc ? 1 : 0),
    tls: compiled.some((c) => c.value.tls !== undefined) || defaultChain?.tls !== undefined,
    statPrefix: m.str('stat_prefix') || (internal ? name : `${address.address}_${address.port}`),
    direction: m.enumOf('traffic_direction', ['UNSPECIFIED', 'INBOUND', 'OUTBOUND'] as const),
    source: m.raw,
  };
}

/** An internal listener has no socket address; an envoy_internal_address, if given, must name the listener itself. */
function readInternalListenerAddress(m: Msg, name: string): SocketAddress {
  m.requiredMsg('internal_listener').onlyFields([]);
  const a = m.msg('address');
  if (a) {
    const ia = a.msg('envoy_internal_address');
    if (!ia) throw a.error('', 'an internal listener takes no socket address (leave address unset)');
    if (ia.str('server_listener_name') !== name) throw ia.error('server_listener_name', `must be the listener's own name ${name}`);
  }
  return { address: `envoy://${name}/`, port: 0, isName: false };
}

function compileChain(m: Msg): FilterChainConfig {
  for (const f of ['on_demand_configuration', 'transport_socket_connect_timeout']) if (m.has(f)) throw m.error(f, 'is not supported yet');
  const filters = m.list('filters');
  if (filters.length === 0) throw m.error('filters', 'a filter chain needs a terminal network filter');
  let terminal: TerminalConfig | undefined;
  const readFilters: NetworkFilterConfig[] = [];
  for (const [i, f] of filters.entries()) {
    const typed = readFilterConfig(f);
    const term = networkTerminal(typed.url || f.str('name'));
    if (term) {
      if (i !== filters.length - 1) throw f.error('', `${term.typeUrl} is a terminal filter and must be last`);
      if (!typed.msg) throw f.error('typed_config', 'is required');
      terminal = term.compile(typed.msg);
      continue;
    }
    const ext = typed.url ? NETWORK_FILTERS_BY_URL.get(typed.url) : NETWORK_FILTERS_BY_NAME.get(f.str('name'));
    if (!ext) throw f.error(typed.url ? 'typed_config' : 'name', `unsupported network filter ${describeTypedConfig(typed, f.str('name'))}`);
    readFilters.push(ext.compile(f.str('name'), typed.msg));
  }
  if (!terminal) throw m.error('filters', `the last network filter must be a terminal filter (${networkTerminalNames().join(' or ')})`);
  return { name: m.str('name'), tls: readDownstreamTransport(m), readFilters, terminal };
}

function readDownstreamTransport(m: Msg): DownstreamTls | undefined {
  const ts = m.msg('transport_socket');
  if (!ts) return undefined;
  const tc = ts.msg('typed_config');
  const url = tc?.str('@type') ?? '';
  if (url === RAW_BUFFER || (!tc && ts.str('name') === 'envoy.transport_sockets.raw_buffer')) return undefined;
  if (url === DOWNSTREAM_TLS && tc) return compileDownstreamTls(tc);
  throw ts.error('typed_config', `unsupported transport socket ${url || ts.str('name')}`);
}

/** A listener built in code rather than from Envoy JSON (ztunnel's 15001/15006/15008). */
export interface PlainListenerOptions {
  readonly name: string;
  readonly address: string;
  readonly port: number;
  /** The one chain's terminal, e.g. a registered extension's compile() result or a program's own. */
  readonly terminal: TerminalConfig;
  /** The chain's read filters, run before the terminal. */
  readonly readFilters?: readonly NetworkFilterConfig[];
  /** Read SO_ORIGINAL_DST (iptables REDIRECT) as the connection's destination. */
  readonly originalDst?: boolean;
  readonly transparent?: boolean;
  readonly direction?: 'UNSPECIFIED' | 'INBOUND' | 'OUTBOUND';
  readonly statPrefix?: string;
}

/** One chain, no TLS, no listener filters but original_dst: the listener core with a program's terminal. */
export function plainListener(o: PlainListenerOptions): ListenerConfig {
  const chain: FilterChainConfig = { name: o.name, tls: undefined, readFilters: o.readFilters ?? [], terminal: o.terminal };
  return {
    name: o.name,
    address: { address: o.address, port: o.port, isName: false },
    bindToPort: true, useOriginalDst: false, transparent: o.transparent ?? false,
    tlsInspector: undefined, httpInspector: undefined, originalDst: o.originalDst ?? false, setInternalDst: false, internal: false,
    listenerFiltersTimeoutMs: 15_000, continueOnListenerFiltersTimeout: false,
    chains: compileFilterChainMatcher([], chain), chainCount: 1, tls: false,
    statPrefix: o.statPrefix ?? `${o.address}_${o.port}`,
    direction: o.direction ?? 'UNSPECIFIED',
    source: { name: o.name },
  };
}
