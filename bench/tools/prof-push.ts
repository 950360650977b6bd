// temp: profile a push (not committed)
import http from 'node:http';
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { AdsServer } from '../../packages/controlplane/src/ads/server.ts';
import { Snapshot } from '../../packages/controlplane/src/ads/snapshot.ts';
import { groupOf } from '../../packages/controlplane/src/files.ts';
import { meshResources, svcHost } from '../lib/mesh-resources.ts';
import { freePort, HOST } from '../lib/net.ts';
const n = Number(process.argv[2] ?? 5000);
const main = process.argv[3] ?? 'packages/proxy/src/main.ts';
const workers = process.argv[4] ?? '1';
const backend = http.createServer((_q, r) => r.end('a'));
const bp = await new Promise<number>((r) => backend.listen(0, HOST, () => r((backend.address() as { port: number }).port)));
const lp = await freePort();
const res = (k: number) => { const m = meshResources(k, lp, bp); const route = { '@type': 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration', name: '9080', virtual_hosts: [...new Set([0, k - 1])].map((i) => ({ name: svcHost(i), domains: [svcHost(i)], routes: [{ match: { prefix: '/' }, route: { cluster: (m.clusters[i] as { name: string }).name } }] })) }; return [...m.clusters, ...m.endpoints, route, m.listeners.at(-1)!]; };
const small = groupOf('s', res(1)), big = groupOf('b', res(n));
const snap = new Snapshot(); snap.set([small]);
const ads = new AdsServer(snap); const ap = await ads.listen(`${HOST}:0`);
const admin = await freePort();
const boot = { node: { id: 'sidecar~127.0.0.1~b.b~b.svc.cluster.local', cluster: 'b' }, admin: { address: { socket_address: { address: HOST, port_value: admin } } },
  dynamic_resources: { ads_config: { api_type: 'DELTA_GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'xds-grpc' } }] }, lds_config: { ads: {} }, cds_config: { ads: {} } },
  static_resources: { clusters: [{ name: 'xds-grpc', type: 'STATIC', connect_timeout: '1s', http2_protocol_options: {}, load_assignment: { cluster_name: 'xds-grpc', endpoints: [{ lb_endpoints: [{ endpoint: { address: { socket_address: { address: HOST, port_value: ap } } } }] }] } }] } };
writeFileSync('/tmp/edsprof/boot.json', JSON.stringify(boot));
const flags = [...(process.env.PROF === 'mon' ? ['--import', '/tmp/edsprof/loopmon.mjs'] : []), ...(process.env.CPUPROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/edsprof'] : []), ...(process.env.GCTRACE ? ['--trace-gc'] : [])];
const p = spawn(process.execPath, [...flags, main, '-c', '/tmp/edsprof/boot.json', '-l', 'warn', '--concurrency', workers], { stdio: 'inherit' });
const get = (host: string) => new Promise<number>((r) => { const q = http.get({ host: HOST, port: lp, path: '/', agent: false, headers: { host } }, (s) => { s.resume(); s.on('end', () => r(s.statusCode ?? 0)); }); q.on('error', () => r(0)); });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
while (await get(svcHost(0)) !== 200) await sleep(100);
if (process.env.PROF === 'mon') { p.kill('SIGUSR2'); await sleep(500); }
const t = performance.now();
snap.set([big]);
while (await get(svcHost(n - 1)) !== 200) await sleep(50);
console.log(`push applied in ${(performance.now() - t).toFixed(0)} ms`);
await sleep(1000);
if (process.env.PROF === 'mon') { p.kill('SIGUSR2'); await sleep(500); }
snap.set([small]);
while (await get(svcHost(n - 1)) === 200) await sleep(50);
await sleep(2000);
await fetch(`http://${HOST}:${admin}/quitquitquit`, { method: 'POST' });
await new Promise((r) => p.once('exit', r));
await ads.close(); backend.close();
