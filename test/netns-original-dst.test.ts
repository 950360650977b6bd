/**
 * The sidecar capture path for real: inside a network namespace, iptables
 * REDIRECTs an app's outbound connection to skua-proxy's 15001; the proxy
 * (uid 1337, excluded from capture like istio-proxy) reads SO_ORIGINAL_DST
 * through the original_dst listener filter and forwards to the ORIGINAL_DST
 * cluster. Root only.
 */
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, writeFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '..');
const NODE = process.execPath;
const NS = `skua-od-${process.pid}`;
const skip = process.getuid?.() !== 0 ? 'needs root (network namespaces, iptables)'
  : !exists('iptables') ? 'iptables is not installed' : false;
if (skip) console.log(`# skipping netns original_dst tests: ${skip}`);

function exists(cmd: string): boolean {
  try { execFileSync('sh', ['-c', `command -v ${cmd}`]); return true; } catch { return false; }
}
const inNs = (...args: string[]): string => execFileSync('ip', ['netns', 'exec', NS, ...args], { encoding: 'utf8' });

const procs: ChildProcess[] = [];
let dir = '';

function spawnInNs(args: string[], uid?: number): ChildProcess {
  const prefix = uid === undefined ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  const p = spawn('ip', ['netns', 'exec', NS, ...prefix, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let err = '';
  p.stderr!.on('data', (d: Buffer) => { err += d; });
  p.on('exit', (code) => { if (code && code !== 0 && !stopping) console.log(`# ${args.join(' ')} exited ${code}: ${err}`); });
  procs.push(p);
  return p;
}
let stopping = false;

async function waitFor(check: () => boolean, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try { if (check()) return; } catch { /* not yet */ }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

const bootstrap = {
  admin: { address: { socket_address: { address: '127.0.0.1', port_value: 15000 } } },
  static_resources: {
    listeners: [{
      name: 'virtualOutbound',
      address: { socket_address: { address: '0.0.0.0', port_value: 15001 } },
      listener_filters: [{ name: 'envoy.filters.listener.original_dst', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.listener.original_dst.v3.OriginalDst' } }],
      filter_chains: [{
        filter_chain_match: { destination_port: 8080 },
        filters: [{
          name: 'envoy.filters.network.http_connection_manager',
          typed_config: {
            '@type': 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager',
            stat_prefix: 'outbound_8080',
            route_config: { virtual_hosts: [{ name: 'any', domains: ['*'], routes: [{ match: { prefix: '/' }, route: { cluster: 'PassthroughCluster' } }] }] },
            http_filters: [{ name: 'envoy.filters.http.router', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.http.router.v3.Router' } }],
          },
        }],
      }],
      default_filter_chain: {
        filters: [{ name: 'tcp', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy', stat_prefix: 'PassthroughCluster', cluster: 'PassthroughCluster' } }],
      },
    }],
    clusters: [{ name: 'PassthroughCluster', type: 'ORIGINAL_DST', lb_policy: 'CLUSTER_PROVIDED', connect_timeout: '2s' }],
  },
};

const BACKEND = `
import http from 'node:http'; import net from 'node:net';
http.createServer((req, res) => res.end('http-backend ' + req.url + ' ' + (req.headers['x-request-id'] ? 'via-proxy' : 'direct'))).listen(8080, '127.0.0.1');
net.createServer((s) => s.end('tcp-backend\\n')).listen(9090, '127.0.0.1');
`;

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'skua-netns-'));
  execFileSync('chmod', ['755', dir]);
  writeFileSync(join(dir, 'bootstrap.json'), JSON.stringify(bootstrap));
  writeFileSync(join(dir, 'backend.mjs'), BACKEND);
  execFileSync('ip', ['netns', 'add', NS]);
  inNs('ip', 'link', 'set', 'lo', 'up');
  // istio-iptables' essence: redirect outbound TCP to 15001 unless it comes from the proxy's uid.
  inNs('iptables', '-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '-m', 'owner', '--uid-owner', '1337', '-j', 'RETURN');
  inNs('iptables', '-t', 'nat', '-A', 'OUTPUT', '-p', 'tcp', '-m', 'multiport', '--dports', '8080,9090', '-j', 'REDIRECT', '--to-ports', '15001');
  spawnInNs([NODE, join(dir, 'backend.mjs')], 1337);
  spawnInNs([NODE, join(ROOT, 'packages/proxy/src/main.ts'), '-c', join(dir, 'bootstrap.json'), '-l', 'warn'], 1337);
  await waitFor(() => inNs('curl', '-s', '--max-time', '1', 'http://127.0.0.1:15000/ready').includes('LIVE'), 'proxy ready');
  await waitFor(() => inNs('ss', '-ltn').includes(':8080'), 'backend');
});

after(() => {
  stopping = true;
  for (const p of procs) if (p.pid) try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ }
  // ip netns exec children: kill anything left in the namespace, then delete it.
  try { execFileSync('sh', ['-c', `ip netns pids ${NS} | xargs -r kill -9`]); } catch { /* none */ }
  try { execFileSync('ip', ['netns', 'delete', NS]); } catch { /* not created */ }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test('captured HTTP is routed by the HCM chain to its original destination', { skip }, () => {
  const body = inNs('curl', '-s', '--max-time', '3', 'http://127.0.0.1:8080/hello');
  assert.equal(body, 'http-backend /hello via-proxy');
  const stats = inNs('curl', '-s', 'http://127.0.0.1:15000/stats');
  assert.match(stats, /http\.outbound_8080\.downstream_rq_2xx: [1-9]/);
  assert.match(stats, /cluster\.PassthroughCluster\.upstream_rq_2xx: [1-9]/);
});

test('captured TCP on another port takes the default chain (tcp_proxy) to its original destination', { skip }, () => {
  const out = inNs('bash', '-c', 'exec 3<>/dev/tcp/127.0.0.1/9090; cat <&3');
  assert.equal(out, 'tcp-backend\n');
  const stats = inNs('curl', '-s', 'http://127.0.0.1:15000/stats');
  assert.match(stats, /tcp\.PassthroughCluster\.downstream_cx_total: [1-9]/);
});
