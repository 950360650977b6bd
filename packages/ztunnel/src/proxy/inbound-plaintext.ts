/**
 * Plaintext inbound (15006 in the pod), a terminal of the core's listener (which read the original
 * destination): callers outside the mesh reach the workload here. The
 * connection is authorized with no peer identity — so a STRICT workload (istiod's DENY on
 * not_principals: presence) refuses it — then connected to the app, from the client's own address
 * when the listener is transparent, and kept under live policy.
 */
import type net from 'node:net';
import { decideIstio, type AuthzFacts, type ConnInfo } from '../core.ts';
import { guessInboundService } from '../inbound/request.ts';
import type { SocketAddress } from '../outbound/request.ts';
import { ConnectionResult, earlyDenyLine } from '../telemetry/connection-result.ts';
import { hostPort } from './headers.ts';
import type { ProxyInputs } from './inputs.ts';
import { relayAndRecord } from './relay.ts';

const NONE: readonly string[] = Object.freeze([]);

export function handleInboundPlaintext(pi: ProxyInputs, socket: net.Socket, info: ConnInfo): void {
  socket.on('error', () => { /* recorded below */ });
  const src: SocketAddress = { address: info.remoteAddress, port: info.remotePort };
  const dst: SocketAddress = info.originalDst;
  const local = pi.localWorkload();
  if (pi.illegalPorts.has(dst.port) || !local) {
    pi.accessLog(earlyDenyLine(hostPort(src), hostPort(dst), 'destination', local ? 'attempted recursive call to ourselves' : 'failed to fetch information about local workload'));
    socket.destroy();
    return;
  }
  const facts: AuthzFacts = {
    directRemoteIp: src.address, remoteIp: src.address, destinationIp: dst.address, destinationPort: dst.port, requestedServerName: '',
    tls: false, peerUriSans: NONE, peerDnsSans: NONE, peerSubject: '', filterState: undefined, metadata: undefined, request: undefined,
  };
  const result = new ConnectionResult(pi.metrics, pi.accessLog, {
    reporter: 'destination', source: pi.state.workloadByAddress(pi.network, src.address), derivedSource: {},
    destination: local, destinationService: guessInboundService(pi.state, pi.state.servicesOf(local), undefined, dst.port, local),
    mtls: false, srcAddr: hostPort(src), dstAddr: hostPort(dst), hboneTarget: undefined,
  });
  const decision = decideIstio(pi.state.policiesFor(local), facts);
  if (!decision.allowed) {
    socket.destroy();
    result.record(`connection closed due to policy rejection: ${decision.reason}`, 'DENY');
    return;
  }
  const upstream = pi.sockets.connect(dst, pi.originalSource && src.address !== dst.address ? src.address : undefined);
  let closeReason: string | undefined;
  const untrack = pi.connections.track({
    direction: 'inbound', proxyUid: pi.proxyUid, localUid: local.uid, src: hostPort(src), originalDst: null, actualDst: hostPort(dst), protocol: 'TCP', facts,
    close: (reason) => { closeReason = reason; socket.destroy(); upstream.destroy(); },
  });
  const run = async (): Promise<void> => {
    await new Promise<void>((resolve, reject) => { upstream.once('connect', resolve); upstream.once('error', reject); });
    await relayAndRecord(result, socket, upstream, () => closeReason);
  };
  run().catch((e: Error) => {
    socket.destroy();
    upstream.destroy();
    result.record(closeReason ?? `connection failed: ${e.message}`, 'CONNECT');
  }).finally(untrack);
}
