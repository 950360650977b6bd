// Interop with an independent xDS client: @grpc/grpc-js-xds (the gRPC team's implementation)
// resolves `xds:///echo.test` through skua-controlplane — LDS (api_listener) → RDS → CDS → EDS —
// and completes real gRPC calls to a real gRPC server.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import * as grpcXds from '@grpc/grpc-js-xds';
import { startControlPlane, type RunningControlPlane } from './lib/controlplane.ts';
import { cleanup, type Json } from './lib/proxy.ts';
import { T } from './lib/config.ts';

const METHOD = '/skua.test.Echo/Echo';
const identity = (b: Buffer): Buffer => b;

function resources(port: number): Record<string, Json[]> {
  return {
    grpc: [
      {
        '@type': 'type.googleapis.com/envoy.config.listener.v3.Listener', name: 'echo.test',
        api_listener: { api_listener: {
          '@type': T.hcm, stat_prefix: 'echo',
          rds: { route_config_name: 'echo-routes', config_source: { ads: {}, resource_api_version: 'V3' } },
          http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': T.router } }],
        } },
      },
      {
        '@type': 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration', name: 'echo-routes',
        virtual_hosts: [{ name: 'echo', domains: ['echo.test'], routes: [{ match: { prefix: '' }, route: { cluster: 'echo-cluster' } }] }],
      },
      {
        '@type': 'type.googleapis.com/envoy.config.cluster.v3.Cluster', name: 'echo-cluster', type: 'EDS', lb_policy: 'ROUND_ROBIN',
        eds_cluster_config: { eds_config: { ads: {}, resource_api_version: 'V3' }, service_name: 'echo-endpoints' },
      },
      {
        '@type': 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment', cluster_name: 'echo-endpoints',
        endpoints: [{ locality: { region: 'r', zone: 'z' }, load_balancing_weight: 1, lb_endpoints: [{ endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } } }] }],
      },
    ],
  };
}

describe('interop: @grpc/grpc-js-xds resolves through skua-controlplane', () => {
  let cp: RunningControlPlane, server: grpc.Server, client: grpc.Client;
  let served = 0;
  before(async () => {
    server = new grpc.Server();
    server.addService({ Echo: { path: METHOD, requestStream: false, responseStream: false, requestSerialize: identity, requestDeserialize: identity, responseSerialize: identity, responseDeserialize: identity } }, {
      Echo: (call: grpc.ServerUnaryCall<Buffer, Buffer>, cb: grpc.sendUnaryData<Buffer>) => { served++; cb(null, Buffer.concat([Buffer.from('echo:'), call.request])); },
    });
    const port = await new Promise<number>((resolve, reject) => server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (e, p) => (e ? reject(e) : resolve(p))));
    cp = await startControlPlane(resources(port));
    process.env.GRPC_XDS_BOOTSTRAP_CONFIG = JSON.stringify({
      xds_servers: [{ server_uri: `127.0.0.1:${cp.port}`, channel_creds: [{ type: 'insecure' }], server_features: ['xds_v3'] }],
      node: { id: 'grpc-client~127.0.0.1~interop.default~default.svc.cluster.local', locality: { region: 'r', zone: 'z' } },
    });
    grpcXds.register();
    client = new grpc.Client('xds:///echo.test', grpc.credentials.createInsecure());
  });
  after(() => cleanup(() => client?.close(), () => server?.forceShutdown(), () => cp?.stop()));

  test('a unary call reaches the server named only by xDS', async () => {
    const reply = await new Promise<Buffer>((resolve, reject) => {
      client.makeUnaryRequest(METHOD, identity, identity, Buffer.from('hi'), new grpc.Metadata(), { deadline: Date.now() + 20_000 }, (err, res) => (err ? reject(err) : resolve(res!)));
    });
    assert.equal(reply.toString(), 'echo:hi');
    assert.equal(served, 1);
    assert.match(cp.log(), /grpc-client~127\.0\.0\.1~interop\.default~default\.svc\.cluster\.local connected \(sotw\)/);
    assert.doesNotMatch(cp.log(), /NACK/);
  });
});
