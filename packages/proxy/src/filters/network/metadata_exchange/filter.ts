import type { Socket } from 'node:net';
import type { Msg } from '../../../config/fields.ts';
import { ConfigError } from '../../../core/errors.ts';
import type { ConnInfo } from '../../../listener/conn-info.ts';
import type { Counter } from '../../../stats/store.ts';
import { localExchange, peerFromMetadata, DOWNSTREAM_PEER, DOWNSTREAM_PEER_ID, PEER_UNKNOWN } from '../../../telemetry/istio/peer.ts';
import { exchangedSubset } from '../../../telemetry/istio/peer.ts';
import { workloadDiscovery } from '../../../telemetry/istio/workload-peers.ts';
import type { LiveNetworkFilter, NetworkFilterConfig, NetworkFilterExtension, NetworkFilterScope } from '../types.ts';
import { encodeExchange, readExchange } from './wire.ts';

export const MX_TYPE = 'type.googleapis.com/envoy.tcp.metadataexchange.config.MetadataExchange';
/** istio-proxy's value for "the exchange ran and found no peer". */
const NOT_FOUND = 'envoy.wasm.metadata_exchange.peer_unknown';

interface MxStats { notFound: Counter; found: Counter; initialHeaderNotFound: Counter; headerNotFound: Counter; metadataAdded: Counter }

/** No exchange: with enable_discovery the WDS workload at the peer's address is the peer, else it is unknown. */
function setNotFound(info: ConnInfo, discovery: boolean): void {
  const s = (info.filterState ??= new Map());
  const peer = discovery ? workloadDiscovery.lookup(info.remoteAddress, false) : undefined;
  if (peer) { s.set(DOWNSTREAM_PEER, peer); return; }
  s.set(DOWNSTREAM_PEER_ID, NOT_FOUND);
  s.set(PEER_UNKNOWN, true);
}

/**
 * The downstream side of Istio's TCP metadata exchange. Active only when the connection's
 * negotiated ALPN equals `protocol` (istio-peer-exchange): then both sides send their node metadata
 * first, and the peer's is read off the stream (the chain waits) into the connection's filter state
 * for the stats filter. Any other connection passes through untouched.
 */
class LiveMx implements LiveNetworkFilter {
  private readonly protocol: string;
  private readonly stats: MxStats;
  private readonly discovery: boolean;
  constructor(o: MxOptions, stats: MxStats) { this.protocol = o.protocol; this.discovery = o.discovery; this.stats = stats; }

  onConnection(socket: Socket, info: ConnInfo, resume: () => void): 'continue' | 'stop' {
    if (info.alpn !== this.protocol) {
      this.stats.notFound.inc();
      setNotFound(info, this.discovery);
      return 'continue';
    }
    this.stats.found.inc();
    const local = localExchange();
    socket.write(encodeExchange(exchangedSubset(local.node.metadata), local.peer.id));
    this.stats.metadataAdded.inc();
    let buf: Buffer = Buffer.alloc(0);
    const finish = (rest: Buffer): void => {
      socket.removeListener('data', onData);
      socket.removeListener('end', onEnd);
      socket.pause();
      if (rest.length) socket.unshift(rest);
      resume();
    };
    const onData = (chunk: Buffer): void => {
      buf = buf.length ? Buffer.concat([buf, chunk]) : chunk;
      const r = readExchange(buf);
      if (r.state === 'need-more') return;
      if (r.state === 'bad-magic') {
        this.stats.initialHeaderNotFound.inc();
        setNotFound(info, this.discovery);
        return finish(buf);
      }
      if (r.state === 'bad-payload') {
        this.stats.headerNotFound.inc();
        setNotFound(info, this.discovery);
        return finish(buf.subarray(r.consumed));
      }
      const s = (info.filterState ??= new Map());
      if (r.id) s.set(DOWNSTREAM_PEER_ID, r.id);
      if (r.metadata) s.set(DOWNSTREAM_PEER, peerFromMetadata(r.id, r.metadata));
      finish(buf.subarray(r.consumed));
    };
    // The peer closed before sending its metadata: nothing to relay.
    const onEnd = (): void => { socket.removeListener('data', onData); socket.destroy(); };
    socket.on('data', onData);
    socket.once('end', onEnd);
    socket.resume();
    return 'stop';
  }
}

interface MxOptions { readonly protocol: string; readonly discovery: boolean }

class MxConfig implements NetworkFilterConfig {
  readonly name: string;
  private readonly options: MxOptions;
  constructor(name: string, options: MxOptions) { this.name = name; this.options = options; }
  live(scope: NetworkFilterScope): LiveNetworkFilter {
    const c = (s: string): Counter => scope.store.counter(`metadata_exchange.${s}`);
    return new LiveMx(this.options, {
      notFound: c('alpn_protocol_not_found'), found: c('alpn_protocol_found'), initialHeaderNotFound: c('initial_header_not_found'),
      headerNotFound: c('header_not_found'), metadataAdded: c('metadata_added'),
    });
  }
}

/** enable_discovery: a peer that does not exchange is looked up in WDS (istio.workload.BootstrapExtension) by address. */
export function compileMx(m: Msg | undefined): MxOptions {
  if (!m) throw new Error('unreachable');
  m.onlyFields(['@type', 'protocol', 'enable_discovery', 'additional_labels']);
  if (m.strList('additional_labels').length) throw m.error('additional_labels', 'is not supported');
  return { protocol: m.requiredStr('protocol'), discovery: m.bool('enable_discovery') };
}

export const MX_NETWORK_EXTENSION: NetworkFilterExtension = {
  typeUrl: MX_TYPE,
  legacyName: 'istio.metadata_exchange',
  compile: (name, m) => {
    if (!m) throw new ConfigError('typed_config', `is required for ${name}`);
    return new MxConfig(name, compileMx(m));
  },
};
