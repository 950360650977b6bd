/**
 * The outbound proxy (15001 in the pod), a terminal of the core's listener: each captured
 * connection's original destination (the listener read it, canonical) goes through the decision
 * record, then to plain TCP (from the pod, marked so the rules let it out) or to an HBONE CONNECT;
 * bytes are relayed and the outcome recorded once.
 */
import { STATUS_CODES } from '../core.ts';
import type net from 'node:net';
import type { Duplex } from 'node:stream';
import type { ConnInfo } from '../core.ts';
import { buildOutboundRequest, type OutboundRequest, type SocketAddress } from '../outbound/request.ts';
import { RoutingError } from '../state/upstream.ts';
import { ConnectionResult, earlyDenyLine, type ResponseFlag } from '../telemetry/connection-result.ts';
import { connectHeaders, hostPort } from './headers.ts';
import type { ProxyInputs } from './inputs.ts';
import { relayAndRecord } from './relay.ts';

/** The failure flag ztunnel reports for an HBONE error. */
export function hboneFlag(e: Error & { code?: string; status?: number }): ResponseFlag {
  if (e.status === 401) return 'DENY';
  const c = e.code ?? '';
  if (/TLS|CERT|SSL|ERR_SSL/.test(c)) return 'TLS_FAILURE';
  if (/HTTP2|H2|SESSION/.test(c)) return 'H2_HANDSHAKE_FAILURE';
  if (/IDENTITY|CA/.test(c)) return 'IDENTITY_ERROR';
  return 'CONNECT';
}

/**
 * The access log's error for a failed HBONE connect: a refusal by status in ztunnel's words
 * (`http status: 401 Unauthorized`, as istio/ztunnel logs it — seen side by side in the interop run),
 * anything else as it came.
 */
export function hboneErrorText(e: Error & { status?: number }): string {
  return e.status !== undefined && e.status > 0 ? `http status: ${e.status} ${STATUS_CODES[e.status] ?? ''}`.trimEnd() : e.message;
}

export function handleOutbound(pi: ProxyInputs, socket: net.Socket, info: ConnInfo): void {
  socket.on('error', () => { /* recorded by the relay or the failure path */ });
  const src: SocketAddress = { address: info.remoteAddress, port: info.remotePort };
  const dst: SocketAddress = info.originalDst;
  const local = pi.localWorkload();
  let req: OutboundRequest;
  try {
    if (!local) throw new RoutingError('unknown_source', 'failed to fetch information about local workload: not (yet) known to the control plane');
    req = buildOutboundRequest({ state: pi.state, hbonePort: pi.hbonePort, illegalPorts: pi.illegalPorts, rng: pi.rng }, local, src.address, dst);
  } catch (e) {
    pi.accessLog(earlyDenyLine(hostPort(src), hostPort(dst), 'source', (e as Error).message));
    socket.destroy();
    return;
  }
  const hbone = req.protocol === 'HBONE';
  const result = new ConnectionResult(pi.metrics, pi.accessLog, {
    reporter: 'source', source: req.source, derivedSource: hbone ? { identity: req.source.identity } : undefined,
    destination: req.actualDestinationWorkload, destinationService: req.intendedService, mtls: hbone,
    srcAddr: hostPort(src), dstAddr: hostPort(req.actualDestination), hboneTarget: req.hboneTarget ? hostPort(req.hboneTarget) : undefined,
  });
  let upstream: Duplex | undefined;
  let closeReason: string | undefined;
  const untrack = pi.connections.track({
    direction: 'outbound', proxyUid: pi.proxyUid, localUid: req.source.uid, src: hostPort(src), originalDst: hostPort(dst), actualDst: hostPort(req.actualDestination),
    protocol: req.protocol, close: (reason) => { closeReason = reason; socket.destroy(); upstream?.destroy(); },
  });
  const run = async (): Promise<void> => {
    if (hbone) {
      if (!pi.hbone) throw Object.assign(new Error('HBONE is not available'), { code: 'HBONE_UNAVAILABLE' });
      const key = { sourceIdentity: req.source.identity, destinationIdentity: req.upstreamSans.at(-1) ?? '', destination: hostPort(req.actualDestination) };
      upstream = (await pi.hbone.connect(key, hostPort(req.hboneTarget as SocketAddress), connectHeaders(src, req))).stream;
    } else {
      const s = pi.sockets.connect(req.actualDestination);
      upstream = s;
      await new Promise<void>((resolve, reject) => { s.once('connect', resolve); s.once('error', reject); });
    }
    if (socket.destroyed) { upstream.destroy(); throw new Error(closeReason ?? 'client disconnected before the upstream was ready'); }
    await relayAndRecord(result, socket, upstream, () => closeReason);
  };
  run().catch((e: Error & { code?: string; status?: number }) => {
    socket.destroy();
    upstream?.destroy();
    result.record(hbone ? hboneErrorText(e) : `connection failed: ${e.message}`, hbone ? hboneFlag(e) : 'CONNECT');
  }).finally(untrack);
}
