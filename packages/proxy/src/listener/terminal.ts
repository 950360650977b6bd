/**
 * Network terminals by registration: the last filter of a chain (Envoy's terminal filter) is
 * whatever extension registered its type URL. HCM and tcp_proxy are two registrations
 * (filters/network/registry.ts); ztunnel's inbound/outbound terminals and tests' are others.
 * The listener only calls the interface below and never names a terminal.
 */
import type { Socket } from 'node:net';
import type { Msg } from '../config/fields.ts';
import type { DrainManager } from '../core/drain.ts';
import type { ConnInfo } from './conn-info.ts';
import type { NetworkFilterScope } from './network-filter.ts';

/** What a terminal can reach when it is made live for one filter chain of one listener. */
export interface TerminalScope extends NetworkFilterScope {
  /** The listener's traffic_direction. */
  readonly direction: 'UNSPECIFIED' | 'INBOUND' | 'OUTBOUND';
  /** The listener's drain manager: long-lived protocols ask it whether a connection should go away. */
  readonly drainManager: DrainManager;
}

/** A terminal made live for one filter chain: shared by the chain's connections. */
export interface LiveTerminal {
  /** Owns the connection from here on (after TLS and the chain's read filters). */
  onConnection(socket: Socket, info: ConnInfo): void;
  /** A read filter closed the connection before it got here (its access-log record, as Envoy writes). */
  rejected?(info: ConnInfo): void;
  /** The chain is replaced or the listener removed: ask open connections to go away. */
  drain?(): void;
  /** While the listener drains: a periodic chance to close idle connections. */
  drainTick?(): void;
  /** The listener closes. */
  close?(): void;
}

/** A compiled terminal config: immutable, validated at load, made live once per chain. */
export interface TerminalConfig {
  /** A short name for logs and config_dump readers ('http_connection_manager', 'tcp_proxy', ...). */
  readonly kind: string;
  live(scope: TerminalScope): LiveTerminal;
}

/** A terminal extension: compile its typed_config (or a TypedStruct's value) once per config load. */
export interface NetworkTerminalExtension {
  readonly typeUrl: string;
  /** The pre-typed_config filter name (`envoy.filters.network.tcp_proxy`), if it has one. */
  readonly legacyName?: string;
  compile(m: Msg): TerminalConfig;
}

const byUrl = new Map<string, NetworkTerminalExtension>();
const byName = new Map<string, NetworkTerminalExtension>();

/** Registers a terminal; registering the same object again is a no-op, another one for a taken URL throws. */
export function registerNetworkTerminal(ext: NetworkTerminalExtension): void {
  const existing = byUrl.get(ext.typeUrl);
  if (existing === ext) return;
  if (existing) throw new Error(`a network terminal for ${ext.typeUrl} is already registered`);
  byUrl.set(ext.typeUrl, ext);
  if (ext.legacyName) byName.set(ext.legacyName, ext);
}

/** The terminal registered for a type URL (or legacy filter name), if any. */
export function networkTerminal(typeUrlOrName: string): NetworkTerminalExtension | undefined {
  return byUrl.get(typeUrlOrName) ?? byName.get(typeUrlOrName);
}

/** The registered terminals by short name (`http_connection_manager`, `tcp_proxy`), for error messages. */
export function networkTerminalNames(): string[] {
  return [...byUrl.values()].map((e) => e.legacyName?.replace(/^envoy\.filters\.network\./, '') ?? e.typeUrl);
}
