/**
 * The upstream side of Istio's TCP metadata exchange (Cluster.filters `istio.metadata_exchange`,
 * what istiod puts on every mTLS outbound cluster): when the upstream TLS session negotiated the
 * exchange's ALPN (istio-peer-exchange), this side sends its node metadata first and reads the
 * peer's off the upstream stream before any byte is relayed, so the app never sees it and the
 * client's telemetry knows the destination workload. Anything else is relayed untouched.
 */
import type { TLSSocket } from 'node:tls';
import type { ConnInfo } from '../../../listener/conn-info.ts';
import { exchangedSubset, localExchange, peerFromMetadata, PEER_UNKNOWN, UPSTREAM_PEER, UPSTREAM_PEER_ID } from '../../../telemetry/istio/peer.ts';
import { encodeExchange, readExchange } from './wire.ts';

/** Runs the exchange when `protocol` was negotiated; calls `done` once the stream is ready to relay. */
export function upstreamExchange(upstream: TLSSocket, protocol: string, info: ConnInfo, done: () => void): void {
  if (upstream.alpnProtocol !== protocol) { done(); return; }
  const local = localExchange();
  upstream.write(encodeExchange(exchangedSubset(local.node.metadata), local.peer.id));
  let buf: Buffer = Buffer.alloc(0);
  let finished = false;
  const finish = (rest: Buffer, found: boolean): void => {
    if (finished) return;
    finished = true;
    upstream.removeListener('data', onData);
    upstream.removeListener('end', onEnd);
    upstream.pause();
    if (!found) (info.filterState ??= new Map()).set(PEER_UNKNOWN, true);
    if (rest.length) upstream.unshift(rest);
    done();
  };
  const onData = (chunk: Buffer): void => {
    buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
    const r = readExchange(buf);
    if (r.state === 'need-more') return;
    // Not an exchange after all: every byte belongs to the app.
    if (r.state === 'bad-magic') return finish(buf, false);
    if (r.state === 'bad-payload') return finish(buf.subarray(r.consumed), false);
    const s = (info.filterState ??= new Map());
    if (r.id) s.set(UPSTREAM_PEER_ID, r.id);
    if (r.metadata) s.set(UPSTREAM_PEER, peerFromMetadata(r.id, r.metadata));
    finish(buf.subarray(r.consumed), true);
  };
  // The upstream closed before its metadata: relay the close (and whatever came) as it is.
  const onEnd = (): void => finish(buf, false);
  upstream.on('data', onData);
  upstream.once('end', onEnd);
  upstream.resume();
}
