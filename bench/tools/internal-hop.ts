// One 100 MB stream through two tcp_proxy hops of one skua-proxy process, the middle hop either an
// internal listener (in-process pair) or a loopback TCP listener:
//   source → listener A → [internal listener B | 127.0.0.1 listener B] → sink
// Run: node bench/tools/internal-hop.ts [--mb 100] [--runs 5]
// Alternates the two shapes, 1 warm-up each, prints the median Gb/s per shape. Stops its proxy by PID.
import { createServer, connect, type AddressInfo } from 'node:net';
import { parseArgs } from 'node:util';
import { startProxy, type RunningProxy } from '../../test/lib/proxy.ts';

const { values } = parseArgs({ options: { mb: { type: 'string', default: '100' }, runs: { type: 'string', default: '5' } } });
const TOTAL = Number(values.mb) << 20;
const RUNS = Number(values.runs);
const TP = 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy';
const tcp = (cluster: string, prefix: string): unknown => ({ filters: [{ name: 'tcp', typed_config: { '@type': TP, stat_prefix: prefix, cluster } }] });
const addr = (port: number): unknown => ({ socket_address: { address: '127.0.0.1', port_value: port } });
const staticCluster = (name: string, address: unknown): unknown => ({ name, type: 'STATIC', connect_timeout: '1s', load_assignment: { cluster_name: name, endpoints: [{ lb_endpoints: [{ endpoint: { address } }] }] } });

async function main(): Promise<void> {
  let received = 0;
  let onDone: (() => void) | undefined;
  const sink = createServer((s) => {
    s.on('data', (c: Buffer) => { received += c.length; if (received >= TOTAL) onDone?.(); });
    s.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => sink.listen(0, '127.0.0.1', () => r()));
  const sinkPort = (sink.address() as AddressInfo).port;
  let proxy: RunningProxy | undefined;
  try {
    proxy = await startProxy((ports) => ({
      bootstrap_extensions: [{ name: 'envoy.bootstrap.internal_listener', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.bootstrap.internal_listener.v3.InternalListener' } }],
      static_resources: {
        listeners: [
          { name: 'a_internal', address: addr(ports('ai')), filter_chains: [tcp('hop_internal', 'a_internal')] },
          { name: 'b_internal', internal_listener: {}, filter_chains: [tcp('sink', 'b_internal')] },
          { name: 'a_tcp', address: addr(ports('at')), filter_chains: [tcp('hop_tcp', 'a_tcp')] },
          { name: 'b_tcp', address: addr(ports('bt')), filter_chains: [tcp('sink', 'b_tcp')] },
        ],
        clusters: [
          staticCluster('hop_internal', { envoy_internal_address: { server_listener_name: 'b_internal' } }),
          staticCluster('hop_tcp', addr(ports('bt'))),
          staticCluster('sink', addr(sinkPort)),
        ],
      },
    }), { ports: ['ai', 'at', 'bt'], logLevel: 'warn' });
    const chunk = Buffer.alloc(64 << 10, 0x5a);
    const once = (port: number): Promise<number> => new Promise((resolve, reject) => {
      received = 0;
      const t0 = performance.now();
      onDone = () => { onDone = undefined; resolve(performance.now() - t0); s.destroy(); };
      const s = connect({ port, host: '127.0.0.1', noDelay: true });
      s.on('error', reject);
      let sent = 0;
      const pump = (): void => {
        while (sent < TOTAL) { sent += chunk.length; if (!s.write(chunk)) { s.once('drain', pump); return; } }
        s.end();
      };
      s.once('connect', pump);
    });
    const shapes: Array<[string, number]> = [['internal listener hop', proxy.ports.ai], ['loopback TCP hop', proxy.ports.at]];
    const results = new Map<string, number[]>(shapes.map(([n]) => [n, []]));
    for (const [, port] of shapes) await once(port);
    for (let i = 0; i < RUNS; i++) {
      for (const [name, port] of shapes) results.get(name)!.push(await once(port));
    }
    for (const [name, ms] of results) {
      const sorted = [...ms].sort((x, y) => x - y);
      const median = sorted[Math.floor(sorted.length / 2)];
      console.log(`${name}: ${(TOTAL * 8 / (median / 1000) / 1e9).toFixed(2)} Gb/s median of ${RUNS} (${sorted.map((x) => x.toFixed(0)).join(', ')} ms for ${values.mb} MB)`);
    }
  } finally {
    await proxy?.stop();
    sink.close();
  }
}

await main();
