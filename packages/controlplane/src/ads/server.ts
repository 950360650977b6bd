/**
 * The ADS gRPC service (envoy.service.discovery.v3.AggregatedDiscoveryService): SotW and
 * Delta streams over one snapshot, pushing to every open stream when the snapshot changes.
 */
import { Server, ServerCredentials, type ServerDuplexStream, type UntypedServiceImplementation } from '@grpc/grpc-js';
import { DELTA_METHOD, SOTW_METHOD } from '@skua/proxy/xds';
import type { Snapshot } from './snapshot.ts';
import { SotwStream } from './sotw-stream.ts';
import { DeltaStream } from './delta-stream.ts';
import type { StreamEvents } from './events.ts';

const identity = (b: Buffer): Buffer => b;
const method = (path: string) => ({
  path, requestStream: true, responseStream: true,
  requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity,
});

export const ADS_SERVICE_DEFINITION = {
  StreamAggregatedResources: method(SOTW_METHOD),
  DeltaAggregatedResources: method(DELTA_METHOD),
};

/** Per-node facts the server keeps for status pages and tests. */
export interface ConnectedProxy {
  readonly nodeId: string;
  readonly node: Record<string, unknown>;
  readonly delta: boolean;
  acks: number;
  nacks: number;
  lastNack: string;
}

export class AdsServer {
  readonly server = new Server({ 'grpc.max_send_message_length': -1, 'grpc.max_receive_message_length': -1 });
  readonly proxies = new Set<ConnectedProxy>();
  private readonly snapshot: Snapshot;
  private readonly log: (line: string) => void;

  constructor(snapshot: Snapshot, log: (line: string) => void = () => {}) {
    this.snapshot = snapshot;
    this.log = log;
    const impl: UntypedServiceImplementation = {
      StreamAggregatedResources: (call: ServerDuplexStream<Buffer, Buffer>) => this.serve(call, false),
      DeltaAggregatedResources: (call: ServerDuplexStream<Buffer, Buffer>) => this.serve(call, true),
    };
    this.server.addService(ADS_SERVICE_DEFINITION, impl);
  }

  /** Binds `host:port` (port 0 = any); returns the port. */
  listen(address: string, credentials = ServerCredentials.createInsecure()): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.bindAsync(address, credentials, (err, port) => (err ? reject(err) : resolve(port)));
    });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.forceShutdown();
      resolve();
    });
  }

  private serve(call: ServerDuplexStream<Buffer, Buffer>, delta: boolean): void {
    let proxy: ConnectedProxy | undefined;
    const events: StreamEvents = {
      connected: (nodeId, node) => {
        proxy = { nodeId, node, delta, acks: 0, nacks: 0, lastNack: '' };
        this.proxies.add(proxy);
        this.log(`ads: ${nodeId} connected (${delta ? 'delta' : 'sotw'})`);
      },
      ack: () => { if (proxy) proxy.acks++; },
      nack: (nodeId, typeUrl, _version, message) => {
        if (proxy) { proxy.nacks++; proxy.lastNack = message; }
        this.log(`ads: ${nodeId} NACKed ${typeUrl.slice(typeUrl.lastIndexOf('.') + 1)}: ${message}`);
      },
      sent: () => {},
      refused: (nodeId, typeUrl, why) => { this.log(`ads: ${nodeId} asked for ${typeUrl} over SotW: not served (${why})`); },
    };
    const send = (b: Buffer): void => { call.write(b); };
    const stream = delta ? new DeltaStream(this.snapshot, send, events) : new SotwStream(this.snapshot, send, events);
    const off = this.snapshot.onChange(() => stream.onSnapshot());
    call.on('data', (b: Buffer) => {
      try {
        stream.onRequest(b);
      } catch (e) {
        this.log(`ads: bad request from ${stream.nodeId || call.getPeer()}: ${(e as Error).message}`);
        call.destroy(e as Error);
      }
    });
    const done = (): void => { off(); if (proxy) this.proxies.delete(proxy); };
    call.on('end', () => { done(); call.end(); });
    call.on('error', done);
    call.on('cancelled', done);
  }
}
