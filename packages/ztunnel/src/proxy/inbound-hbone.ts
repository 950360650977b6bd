/**
 * HBONE inbound (15008): each CONNECT stream goes through the inbound decision (400/503), then
 * authorization with the peer's verified identity (401), then a connection to the app (503 when
 * it fails) — from the client's own address when allowed — then 200, an optional PROXY v2 header
 * carrying the peer identity, and the relay; the connection stays under live policy.
 */
import { decideIstio, type HboneInbound } from '../core.ts';
import { buildInboundRequest, InboundError, type InboundRequest } from '../inbound/request.ts';
import { proxyV2Header } from '../inbound/proxy-protocol.ts';
import type { SocketAddress } from '../outbound/request.ts';
import { ConnectionResult, earlyDenyLine } from '../telemetry/connection-result.ts';
import { baggage, hostPort } from './headers.ts';
import type { ProxyInputs } from './inputs.ts';
import { relayAndRecord } from './relay.ts';

export function handleInboundHbone(pi: ProxyInputs, inbound: HboneInbound, responseBaggage: boolean): void {
  // The core's HBONE server reports canonical addresses (IPv4-mapped as IPv4).
  const src: SocketAddress = { address: inbound.remoteAddress, port: inbound.remotePort };
  const dst: SocketAddress = { address: inbound.localAddress, port: inbound.localPort };
  const local = pi.localWorkload();
  const forwarded = inbound.headers.forwarded;
  let req: InboundRequest;
  try {
    if (!local) throw new InboundError(503, 'failed to fetch information about local workload');
    req = buildInboundRequest({ state: pi.state, network: pi.network, illegalPorts: pi.illegalPorts }, local,
      { src, dst, srcIdentity: inbound.peerIdentity }, inbound.authority, typeof forwarded === 'string' ? forwarded : undefined);
  } catch (e) {
    pi.accessLog(earlyDenyLine(hostPort(src), hostPort(dst), 'destination', (e as Error).message));
    inbound.refuse(e instanceof InboundError ? e.status : 503);
    return;
  }
  const result = new ConnectionResult(pi.metrics, pi.accessLog, {
    reporter: 'destination', source: req.source, derivedSource: { identity: inbound.peerIdentity }, destination: local,
    destinationService: req.destinationService, mtls: true, srcAddr: hostPort(src), dstAddr: hostPort(dst), hboneTarget: inbound.authority,
  });
  const decision = decideIstio(pi.state.policiesFor(local), req.facts);
  if (!decision.allowed) {
    inbound.refuse(401);
    result.record(`connection closed due to policy rejection: ${decision.reason}`, 'DENY');
    return;
  }
  const upstream = pi.sockets.connect(req.upstream, pi.originalSource && src.address !== req.upstream.address ? src.address : undefined);
  let closeReason: string | undefined;
  let stream: ReturnType<HboneInbound['accept']> | undefined;
  const untrack = pi.connections.track({
    direction: 'inbound', proxyUid: pi.proxyUid, localUid: local.uid, src: hostPort(src), originalDst: req.forHost ?? null,
    actualDst: hostPort(req.upstream), protocol: 'HBONE', facts: req.facts,
    close: (reason) => { closeReason = reason; upstream.destroy(); if (stream) stream.destroy(); else inbound.refuse(401); },
  });
  const run = async (): Promise<void> => {
    try {
      await new Promise<void>((resolve, reject) => { upstream.once('connect', resolve); upstream.once('error', reject); });
    } catch (e) {
      inbound.refuse(503);
      throw e;
    }
    if (closeReason) throw new Error(closeReason);
    stream = inbound.accept(responseBaggage ? { baggage: baggage(local) } : undefined);
    if (req.tunnel?.protocol === 'PROXY') upstream.write(proxyV2Header(src, req.tunnel.target, inbound.peerIdentity));
    await relayAndRecord(result, stream, upstream, () => closeReason);
  };
  run().catch((e: Error) => {
    upstream.destroy();
    result.record(closeReason ?? `connection failed: ${e.message}`, closeReason?.includes('policy') ? 'DENY' : 'CONNECT');
  }).finally(untrack);
}
