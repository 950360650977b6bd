/**
 * @skua/proxy/listener — listeners with pluggable network terminals: accept (overload checks,
 * listener filters, filter-chain match, TLS, read filters) then hand the connection to the
 * chain's terminal; drain is a primitive every listener runs under. Re-exports only.
 */
export { ActiveListener } from '../listener/active.ts';
export { compileListener, plainListener, type ListenerConfig, type FilterChainConfig, type PlainListenerOptions } from '../listener/config.ts';
export {
  registerNetworkTerminal, networkTerminal,
  type NetworkTerminalExtension, type TerminalConfig, type LiveTerminal, type TerminalScope,
} from '../listener/terminal.ts';
export type { NetworkFilterConfig, LiveNetworkFilter, NetworkFilterScope, NetworkFilterExtension } from '../listener/network-filter.ts';
export { ListenerManager } from '../listener/manager.ts';
export { connInfoOf, type ConnInfo } from '../listener/conn-info.ts';
