/**
 * Where a proxy's sockets live. In-pod mode makes every socket inside the pod's network namespace
 * with SO_MARK 0x539 (so the pod's rules let ztunnel's own traffic through); dedicated mode uses
 * this namespace. Listeners may be transparent (IP_TRANSPARENT) so upstream connections can take
 * the client's address as their source. Every socket has TCP_NODELAY, as ztunnel's: a relay that
 * writes a message in two parts (a waypoint's HTTP/1.1 response head and its last chunk) must not
 * wait for the app's delayed ACK.
 */
import net from 'node:net';
import { createSocket, listenInNetns, socketInNetns } from '../core.ts';
import type { SocketAddress } from '../outbound/request.ts';

export interface SocketFactory {
  /** A listening server whose accepted sockets start paused (the core's listener takes them on). */
  listen(address: string, port: number): Promise<net.Server>;
  /** Connects, optionally from `localAddress` (source spoofing, needs a transparent socket). */
  connect(dst: SocketAddress, localAddress?: string): net.Socket;
  /** The namespace fd (in-pod) or -1. */
  readonly netnsFd: number;
}

const family = (ip: string): 4 | 6 => (ip.includes(':') ? 6 : 4);

function connectOn(s: net.Socket, dst: SocketAddress, localAddress: string | undefined): net.Socket {
  s.connect(localAddress ? { host: dst.address, port: dst.port, localAddress } : { host: dst.address, port: dst.port });
  s.setNoDelay(true);
  return s;
}

function noDelayOnAccept(server: net.Server): net.Server {
  server.on('connection', (s: net.Socket) => s.setNoDelay(true));
  return server;
}

export class InPodSockets implements SocketFactory {
  readonly netnsFd: number;
  private readonly mark: number;
  private readonly transparent: boolean;

  constructor(netnsFd: number, mark: number, transparent: boolean) {
    this.netnsFd = netnsFd;
    this.mark = mark;
    this.transparent = transparent;
  }

  listen(address: string, port: number): Promise<net.Server> {
    return listenInNetns(this.netnsFd, address, port, { mark: this.mark, transparent: this.transparent, pauseOnConnect: true }).then(noDelayOnAccept);
  }

  connect(dst: SocketAddress, localAddress?: string): net.Socket {
    const spoof = localAddress !== undefined && this.transparent;
    const s = socketInNetns(this.netnsFd, family(dst.address), { mark: this.mark, transparent: spoof });
    return connectOn(s, dst, spoof ? localAddress : undefined);
  }
}

export class HostSockets implements SocketFactory {
  readonly netnsFd = -1;
  private readonly mark: number | undefined;

  constructor(mark: number | undefined) {
    this.mark = mark;
  }

  async listen(address: string, port: number): Promise<net.Server> {
    const server = net.createServer({ allowHalfOpen: true, pauseOnConnect: true, noDelay: true });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen({ host: address, port }, () => { server.off('error', reject); resolve(); });
    });
    return server;
  }

  connect(dst: SocketAddress, localAddress?: string): net.Socket {
    if (this.mark === undefined && localAddress === undefined) return net.connect({ host: dst.address, port: dst.port, allowHalfOpen: true, noDelay: true });
    const s = createSocket(family(dst.address), { mark: this.mark, transparent: localAddress !== undefined });
    (s as unknown as { allowHalfOpen: boolean }).allowHalfOpen = true;
    return connectOn(s, dst, localAddress);
  }
}
