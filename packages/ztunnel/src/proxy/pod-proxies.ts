/**
 * The proxies of one workload on the core's listener primitives: outbound 15001, plaintext inbound
 * 15006 and (with a server) HBONE 15008 are each a plainListener whose terminal is ztunnel's
 * handler (15008: the core's hboneTerminal), accepting on a server the workload's socket factory
 * bound (in-pod: inside the pod's namespace). The listener core counts, applies overload limits,
 * reads the original destination and hands each connection over with canonical addresses.
 * Closing is ztunnel's drain: the listeners drain (stop accepting; HBONE sends GOAWAY), open
 * connections get the termination deadline, then what is left is closed.
 */
import type net from 'node:net';
import { ActiveListener, hboneTerminal, plainListener, StatsStore, type ConnInfo, type HboneServer, type TerminalConfig } from '../core.ts';
import { handleInboundPlaintext } from './inbound-plaintext.ts';
import type { ProxyInputs } from './inputs.ts';
import { handleOutbound } from './outbound.ts';

export interface PodProxyOptions {
  readonly outboundPort: number;
  readonly inboundPlaintextPort: number;
  readonly inboundPort: number;
  /** Wildcard address to bind ('0.0.0.0' or '::'). */
  readonly bindAddress: string;
  readonly terminationDeadlineMs: number;
  /** HBONE inbound: the workload's 15008 server (TLS with its certificate, CONNECT streams). */
  readonly hbone?: HboneServer;
}

export interface RunningProxies {
  readonly ports: { readonly outbound: number; readonly inboundPlaintext: number; readonly inbound: number | undefined };
  close(): Promise<void>;
}

// The listener core's stats (listener.ztunnel_*.downstream_cx_*) are not on ztunnel's /metrics; one
// store for all pods, with a fixed prefix per port, so pods coming and going add no series.
const store = new StatsStore();

function podTerminal(kind: string, pi: ProxyInputs, handle: (pi: ProxyInputs, socket: net.Socket, info: ConnInfo) => void): TerminalConfig {
  return { kind, live: () => ({ onConnection: (socket, info) => handle(pi, socket, info) }) };
}

export async function startProxies(pi: ProxyInputs, o: PodProxyOptions): Promise<RunningProxies> {
  const listeners: ActiveListener[] = [];
  const bind = async (name: string, port: number, terminal: TerminalConfig, originalDst: boolean): Promise<number> => {
    const server = await pi.sockets.listen(o.bindAddress, port);
    const l = new ActiveListener(plainListener({ name, address: o.bindAddress, port, terminal, originalDst, statPrefix: name,
      direction: name === 'ztunnel_outbound' ? 'OUTBOUND' : 'INBOUND' }), undefined, store);
    l.listenOn(server);
    listeners.push(l);
    return l.boundPort;
  };
  try {
    const outbound = await bind('ztunnel_outbound', o.outboundPort, podTerminal('ztunnel_outbound', pi, handleOutbound), true);
    const inboundPlaintext = await bind('ztunnel_inbound_plaintext', o.inboundPlaintextPort, podTerminal('ztunnel_inbound_plaintext', pi, handleInboundPlaintext), true);
    const inbound = o.hbone ? await bind('ztunnel_inbound', o.inboundPort, hboneTerminal(o.hbone), false) : undefined;
    return {
      ports: { outbound, inboundPlaintext, inbound },
      close: async () => {
        for (const l of listeners) l.drain();
        const deadline = Date.now() + o.terminationDeadlineMs;
        while (Date.now() < deadline && open(pi) > 0) {
          await new Promise((r) => setTimeout(r, 50));
        }
        pi.connections.closeProxy(pi.proxyUid, 'connection closed due to connection drain');
        // Each closed connection still writes its access log line (after its sockets' close events).
        for (const end = Date.now() + 1000; Date.now() < end && pi.connections.unsettled(pi.proxyUid) > 0;) {
          await new Promise((r) => setTimeout(r, 10));
        }
        for (const l of listeners) l.close();
      },
    };
  } catch (e) {
    for (const l of listeners) l.close();
    throw e;
  }
}

function open(pi: ProxyInputs): number {
  const c = pi.connections.connectionsOf(pi.proxyUid);
  return c.inbound.length + c.outbound.length;
}
