/**
 * The proxies of one workload: outbound 15001, plaintext inbound 15006 (and HBONE inbound 15008
 * when an inbound handler is given), each accepting on the workload's socket factory. Closing
 * stops accepting at once, lets open connections finish for the termination deadline, then
 * closes what is left (ztunnel's drain).
 */
import type net from 'node:net';
import { log } from '../core.ts';
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
  /** HBONE inbound: takes each accepted TLS-to-be socket on 15008. */
  readonly inbound?: (pi: ProxyInputs, socket: net.Socket) => void;
}

export interface RunningProxies {
  readonly ports: { readonly outbound: number; readonly inboundPlaintext: number; readonly inbound: number | undefined };
  close(): Promise<void>;
}

export async function startProxies(pi: ProxyInputs, o: PodProxyOptions): Promise<RunningProxies> {
  const servers: net.Server[] = [];
  const bind = async (port: number, handle: (pi: ProxyInputs, s: net.Socket) => void): Promise<number> => {
    const server = await pi.sockets.listen(o.bindAddress, port);
    server.on('connection', (s: net.Socket) => handle(pi, s));
    server.on('error', (e) => log.warn(`listener ${o.bindAddress}:${port}: ${e.message}`));
    servers.push(server);
    return (server.address() as net.AddressInfo).port;
  };
  try {
    const outbound = await bind(o.outboundPort, handleOutbound);
    const inboundPlaintext = await bind(o.inboundPlaintextPort, handleInboundPlaintext);
    const inbound = o.inbound ? await bind(o.inboundPort, o.inbound) : undefined;
    return {
      ports: { outbound, inboundPlaintext, inbound },
      close: async () => {
        for (const s of servers) s.close();
        const deadline = Date.now() + o.terminationDeadlineMs;
        while (Date.now() < deadline && open(pi) > 0) {
          await new Promise((r) => setTimeout(r, 50));
        }
        pi.connections.closeProxy(pi.proxyUid, 'connection closed due to connection drain');
      },
    };
  } catch (e) {
    for (const s of servers) s.close();
    throw e;
  }
}

function open(pi: ProxyInputs): number {
  const c = pi.connections.connectionsOf(pi.proxyUid);
  return c.inbound.length + c.outbound.length;
}
