/**
 * A small cluster in network namespaces for end-to-end tests: a "core" namespace with an underlay
 * bridge (where the control plane runs), N node namespaces attached to it (each runs a ztunnel and
 * has a bridge for its pods), and pods with ambient's in-pod rules. Everything is torn down by
 * destroy(); processes started through spawnIn() are killed there too (by PID, with children).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { createNode, createPod, deleteNode, deletePod, run, type NodeNetwork } from '../../src/cni/pods.ts';

export interface TopologyNode {
  readonly name: string;
  readonly netns: string;
  readonly underlayIp: string;
  readonly network: NodeNetwork;
}

export class Topology {
  readonly tag: string;
  readonly core: string;
  readonly coreIp: string;
  readonly nodes: TopologyNode[] = [];
  private readonly pods: string[] = [];
  private readonly procs: ChildProcess[] = [];
  private readonly subnet: number;

  /** `subnet` keeps concurrent topologies apart in logs (addresses only matter inside the namespaces). */
  constructor(nodeCount: number, subnet: number) {
    this.tag = `${process.pid % 10000}`;
    this.subnet = subnet;
    this.core = `skzc${subnet}x${this.tag}`;
    this.coreIp = `10.78.${subnet}.1`;
    run('ip', ['netns', 'add', this.core]);
    run('ip', ['-n', this.core, 'link', 'set', 'lo', 'up']);
    run('ip', ['-n', this.core, 'link', 'add', 'under0', 'type', 'bridge']);
    run('ip', ['-n', this.core, 'addr', 'add', `${this.coreIp}/24`, 'dev', 'under0']);
    run('ip', ['-n', this.core, 'link', 'set', 'under0', 'up']);
    for (let i = 1; i <= nodeCount; i++) this.addNode(i);
    // Every node reaches every other node's pods through the underlay.
    for (const a of this.nodes) {
      for (const b of this.nodes) {
        if (a !== b) run('ip', ['-n', a.netns, 'route', 'add', `${b.network.gateway.replace(/\.1$/, '.0')}/24`, 'via', b.underlayIp]);
      }
      run('ip', ['-n', this.core, 'route', 'add', `${a.network.gateway.replace(/\.1$/, '.0')}/24`, 'via', a.underlayIp]);
    }
  }

  private addNode(i: number): void {
    const netns = `skzn${this.subnet}${i}x${this.tag}`;
    const network: NodeNetwork = { netns, bridge: 'pods0', gateway: `10.77.${this.subnet * 10 + i}.1`, prefixLength: 24 };
    createNode(network);
    const underlayIp = `10.78.${this.subnet}.${10 + i}`;
    const peer = `u${i}x${this.tag}`;
    run('ip', ['-n', netns, 'link', 'add', 'under0', 'type', 'veth', 'peer', 'name', peer, 'netns', this.core]);
    run('ip', ['-n', this.core, 'link', 'set', peer, 'master', 'under0']);
    run('ip', ['-n', this.core, 'link', 'set', peer, 'up']);
    run('ip', ['-n', netns, 'addr', 'add', `${underlayIp}/24`, 'dev', 'under0']);
    run('ip', ['-n', netns, 'link', 'set', 'under0', 'up']);
    this.nodes.push({ name: `node${i}`, netns, underlayIp, network });
  }

  /** A pod on node `i` (1-based) with the last address byte `host`; returns its namespace name and IP. */
  addPod(i: number, short: string, host: number, ambient = true): { netns: string; ip: string; path: string } {
    const node = this.nodes[i - 1];
    const netns = `skzp${short}x${this.tag}`;
    const ip = node.network.gateway.replace(/\.1$/, `.${host}`);
    const path = createPod(node.network, { name: netns, ip, ambient });
    this.pods.push(netns);
    return { netns, ip, path };
  }

  /** Starts a process inside a namespace; killed (with its children) by destroy(). */
  spawnIn(netns: string, cmd: string, args: readonly string[], env: Record<string, string> = {}): ChildProcess {
    const p = spawn('ip', ['netns', 'exec', netns, cmd, ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
    this.procs.push(p);
    return p;
  }

  async stop(p: ChildProcess, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
    if (p.exitCode !== null || p.signalCode !== null) return p.exitCode;
    try { process.kill(-(p.pid as number), signal); } catch { /* gone */ }
    const [code] = await once(p, 'exit') as [number | null];
    return code;
  }

  async destroy(): Promise<void> {
    for (const p of this.procs) await this.stop(p, 'SIGKILL');
    for (const pod of this.pods) deletePod(pod);
    for (const n of this.nodes) deleteNode(n.network);
    try { run('ip', ['netns', 'del', this.core]); } catch { /* gone */ }
  }
}

/** A TCP server in a namespace (python): greets with `peer=<client ip>`, then echoes. */
export const ECHO_SERVER = `
import socket, sys, threading
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64)
print("listening", flush=True)
def serve(c, a):
    c.sendall(("peer=%s\\n" % a[0]).encode())
    while True:
        d = c.recv(65536)
        if not d: break
        c.sendall(d)
    c.shutdown(socket.SHUT_WR); c.close()
while True:
    c, a = s.accept()
    threading.Thread(target=serve, args=(c, a), daemon=True).start()
`;

/** A client run in a namespace (python): connects, sends N bytes, half-closes, prints what came back. */
export const SEND_CLIENT = `
import socket, sys
c = socket.create_connection((sys.argv[1], int(sys.argv[2])), 5)
n = int(sys.argv[3]); data = bytes((i * 7) % 251 for i in range(n))
got = b""
try:
    c.sendall(data); c.shutdown(socket.SHUT_WR)
    c.settimeout(10)
    while True:
        d = c.recv(65536)
        if not d: break
        got += d
except OSError:
    pass  # closed or reset by the other side: report what arrived
head, _, rest = got.partition(b"\\n")
print(head.decode(), len(rest), rest == data, flush=True)
`;

/**
 * A TCP server in a namespace (python) behind a PROXY protocol v2 header: reads the header, greets
 * with `proxy=<src ip>:<port> <dst ip>:<port> tlvs=<type hex>:<value>,...`, then echoes.
 */
export const PROXY_V2_ECHO_SERVER = `
import socket, struct, sys, threading
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", int(sys.argv[1]))); s.listen(64)
def read(c, n):
    b = b""
    while len(b) < n:
        d = c.recv(n - len(b))
        if not d: raise EOFError
        b += d
    return b
def serve(c):
    try:
        head = read(c, 16)
        assert head[:12] == b"\\r\\n\\r\\n\\x00\\r\\nQUIT\\n" and head[12] == 0x21 and head[13] == 0x11, head
        body = read(c, struct.unpack("!H", head[14:16])[0])
        src, dst = socket.inet_ntoa(body[0:4]), socket.inet_ntoa(body[4:8])
        sport, dport = struct.unpack("!HH", body[8:12])
        tlvs, i = [], 12
        while i < len(body):
            t, n = body[i], struct.unpack("!H", body[i + 1:i + 3])[0]
            tlvs.append("%02x:%s" % (t, body[i + 3:i + 3 + n].decode())); i += 3 + n
        c.sendall(("proxy=%s:%d %s:%d tlvs=%s\\n" % (src, sport, dst, dport, ",".join(tlvs))).encode())
        while True:
            d = c.recv(65536)
            if not d: break
            c.sendall(d)
        c.shutdown(socket.SHUT_WR)
    except (EOFError, OSError, AssertionError):
        pass
    c.close()
while True:
    c, _ = s.accept()
    threading.Thread(target=serve, args=(c,), daemon=True).start()
`;
