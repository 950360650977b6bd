// `skua-proxy istio-iptables` for real, in a network namespace (root only): the injector's
// istio-init command line produces the chains seed 002 lists, a second run changes nothing,
// different flags are refused unless --reconcile, `istio-clean-iptables` leaves nothing behind,
// and the rules do what they say: app traffic lands on 15001 (with its original destination),
// inbound on 15006, the proxy's uid and excluded ports are not captured; IPv6 the same way.
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const ROOT = resolve(import.meta.dirname, '../../..');
const MAIN = join(ROOT, 'packages/proxy/src/main.ts');
const POD = `skua-ipt-pod-${process.pid}`;
const EXT = `skua-ipt-ext-${process.pid}`;
const has = (cmd: string): boolean => spawnSync('sh', ['-c', `command -v ${cmd}`]).status === 0;
const skip = process.getuid?.() !== 0 ? 'needs root (network namespaces, iptables)' : !has('iptables') || !has('ip6tables') ? 'iptables is not installed' : false;

const SEED_ARGS = ['-p', '15001', '-z', '15006', '-u', '1337', '-m', 'REDIRECT', '-i', '*', '-x', '', '-b', '*', '-d', '15090,15021,15020'];

/**
 * Seed 002's `iptables -L -n -t nat --line-number` listing of the ISTIO_* chains. One update:
 * current istio-iptables adds `-p tcp ! --dport 15008` to ISTIO_OUTPUT rules 2 and 5 (the
 * proxy's HBONE connections to its own pod are not looped into inbound), so those rows read
 * `tcp ... tcp dpt:!15008 owner ... match 1337` where the seed's older listing has `all`.
 */
const SEED_LISTING = `
Chain ISTIO_INBOUND (1 references)
1 RETURN tcp 0.0.0.0/0 0.0.0.0/0 tcp dpt:15008
2 RETURN tcp 0.0.0.0/0 0.0.0.0/0 tcp dpt:15090
3 RETURN tcp 0.0.0.0/0 0.0.0.0/0 tcp dpt:15021
4 RETURN tcp 0.0.0.0/0 0.0.0.0/0 tcp dpt:15020
5 ISTIO_IN_REDIRECT tcp 0.0.0.0/0 0.0.0.0/0
Chain ISTIO_IN_REDIRECT (3 references)
1 REDIRECT tcp 0.0.0.0/0 0.0.0.0/0 redir ports 15006
Chain ISTIO_OUTPUT (1 references)
1 RETURN all 127.0.0.6 0.0.0.0/0
2 ISTIO_IN_REDIRECT tcp 0.0.0.0/0 !127.0.0.1 tcp dpt:!15008 owner UID match 1337
3 RETURN all 0.0.0.0/0 0.0.0.0/0 ! owner UID match 1337
4 RETURN all 0.0.0.0/0 0.0.0.0/0 owner UID match 1337
5 ISTIO_IN_REDIRECT tcp 0.0.0.0/0 !127.0.0.1 tcp dpt:!15008 owner GID match 1337
6 RETURN all 0.0.0.0/0 0.0.0.0/0 ! owner GID match 1337
7 RETURN all 0.0.0.0/0 0.0.0.0/0 owner GID match 1337
8 RETURN all 0.0.0.0/0 127.0.0.1
9 ISTIO_REDIRECT all 0.0.0.0/0 0.0.0.0/0
Chain ISTIO_REDIRECT (1 references)
1 REDIRECT tcp 0.0.0.0/0 0.0.0.0/0 redir ports 15001`.trim();

/** `iptables -L -n --line-numbers` → the ISTIO_* chains, one space between columns, protocol numbers as names. */
function normalizeListing(text: string): string {
  const out: string[] = [];
  let keep = false;
  const proto: Record<string, string> = { '0': 'all', '6': 'tcp', '17': 'udp' };
  for (const line of text.split('\n')) {
    if (line.startsWith('Chain ')) { keep = line.startsWith('Chain ISTIO_'); if (keep) out.push(line.trim()); continue; }
    if (!keep || !/^\d/.test(line)) continue;
    const f = line.trim().split(/\s+/);
    // num target prot opt source destination [extras...]; `opt` is always "--" here.
    out.push([f[0], f[1], proto[f[2]] ?? f[2], ...f.slice(4)].join(' '));
  }
  return out.join('\n');
}

const inNs = (ns: string, ...args: string[]): string => execFileSync('ip', ['netns', 'exec', ns, ...args], { encoding: 'utf8' });
const saveState = (bin = 'iptables-save'): string => inNs(POD, bin).split('\n').filter((l) => !l.startsWith('#')).join('\n');

function skuaIptables(args: string[], cmd = 'istio-iptables'): { code: number; out: string; err: string } {
  const r = spawnSync('ip', ['netns', 'exec', POD, process.execPath, MAIN, cmd, ...args], { encoding: 'utf8', timeout: 30_000 });
  return { code: r.status ?? -1, out: r.stdout, err: r.stderr };
}

// A stand-in for the proxy (uid 1337): says which port accepted the connection and the original destination.
const CAPTURE = `
import net from 'node:net';
import { getOriginalDst } from ${JSON.stringify(join(ROOT, 'packages/proxy/src/sys/sockopt.ts'))};
for (const port of [15001, 15006, 15020]) net.createServer((s) => { const od = getOriginalDst(s); s.end(port + ' ' + (od ? od.address + ':' + od.port : 'none') + '\\n'); }).listen(port, '::');
`;
// The app's peer outside the pod, and the app itself on 8080 / 9998.
const ECHO = `import net from 'node:net'; for (const port of process.argv.slice(2)) net.createServer((s) => s.end('direct ' + port + '\\n')).listen(Number(port), '::');`;

const procs: ChildProcess[] = [];
let dir = '';

function start(ns: string, args: string[], uid?: number): void {
  const prefix = uid === undefined ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  const p = spawn('ip', ['netns', 'exec', ns, ...prefix, ...args], { stdio: 'ignore' });
  procs.push(p);
}

/** One TCP exchange from inside a namespace (as `uid` when given): what the server said. */
function dial(ns: string, host: string, port: number, uid?: number): string {
  const prefix = uid === undefined ? [] : ['setpriv', `--reuid=${uid}`, `--regid=${uid}`, '--clear-groups'];
  const script = `const s=require('net').connect({host:${JSON.stringify(host)},port:${port}});let d='';s.on('data',(c)=>d+=c);s.on('end',()=>{process.stdout.write(d.trim())});s.on('error',(e)=>{process.stdout.write('error '+e.code)});setTimeout(()=>{process.stdout.write('timeout');process.exit(0)},3000).unref();`;
  return inNs(ns, ...prefix, process.execPath, '-e', script);
}

async function until(check: () => boolean, what: string): Promise<void> {
  const end = Date.now() + 10_000;
  while (Date.now() < end) { try { if (check()) return; } catch { /* not yet */ } await new Promise((r) => setTimeout(r, 100)); }
  throw new Error(`timed out waiting for ${what}`);
}

before(async () => {
  if (skip) return;
  dir = mkdtempSync(join(tmpdir(), 'skua-ipt-'));
  execFileSync('chmod', ['755', dir]);
  writeFileSync(join(dir, 'capture.mjs'), CAPTURE);
  writeFileSync(join(dir, 'echo.mjs'), ECHO);
  execFileSync('ip', ['netns', 'add', POD]);
  execFileSync('ip', ['netns', 'add', EXT]);
  inNs(POD, 'ip', 'link', 'add', 'eth0', 'type', 'veth', 'peer', 'name', 'ext0', 'netns', EXT);
  for (const [ns, nic, v4, v6] of [[POD, 'eth0', '10.9.0.2/24', 'fd00:9::2/64'], [EXT, 'ext0', '10.9.0.1/24', 'fd00:9::1/64']]) {
    inNs(ns, 'ip', 'addr', 'add', v4, 'dev', nic);
    inNs(ns, 'ip', '-6', 'addr', 'add', v6, 'dev', nic, 'nodad');
    inNs(ns, 'ip', 'link', 'set', nic, 'up');
    inNs(ns, 'ip', 'link', 'set', 'lo', 'up');
  }
  start(POD, [process.execPath, join(dir, 'capture.mjs')], 1337);
  start(POD, [process.execPath, join(dir, 'echo.mjs'), '8080', '9998']);
  start(EXT, [process.execPath, join(dir, 'echo.mjs'), '80', '9998']);
  await until(() => inNs(POD, 'ss', '-ltn').includes(':15006') && inNs(POD, 'ss', '-ltn').includes(':9998') && inNs(EXT, 'ss', '-ltn').includes(':9998'), 'test servers');
});

after(() => {
  for (const p of procs) if (p.pid) try { process.kill(p.pid, 'SIGKILL'); } catch { /* gone */ }
  for (const ns of [POD, EXT]) {
    try { execFileSync('sh', ['-c', `ip netns pids ${ns} | xargs -r kill -9`]); } catch { /* none */ }
    try { execFileSync('ip', ['netns', 'delete', ns]); } catch { /* not created */ }
  }
  if (dir) rmSync(dir, { recursive: true, force: true });
});

test("istio-init's command line: seed 002's chains, applied once, a second run changes nothing", { skip }, () => {
  const first = skuaIptables(SEED_ARGS);
  assert.equal(first.code, 0, first.err);
  assert.equal(first.out, 'IPv4: 18 rules applied\n');
  assert.equal(normalizeListing(inNs(POD, 'iptables', '-L', '-n', '-t', 'nat', '--line-numbers')), SEED_LISTING);
  const before = saveState();
  const second = skuaIptables(SEED_ARGS);
  assert.equal(second.code, 0, second.err);
  assert.equal(second.out, 'IPv4: 18 rules already in place\n');
  assert.equal(saveState(), before, 'iptables-save is byte for byte the same after the second run');
  // PREROUTING and OUTPUT jump once each into our chains (no duplicate jumps).
  assert.equal(before.split('\n').filter((l) => /^-A (PREROUTING|OUTPUT) .*-j ISTIO_/.test(l)).length, 2);
});

test('the applied rules capture: app → 15001 with its original destination, inbound → 15006; uid 1337 and excluded ports pass', { skip }, () => {
  assert.equal(dial(POD, '10.9.0.1', 80), '15001 10.9.0.1:80', 'app outbound is redirected to the outbound capture port');
  assert.equal(dial(POD, '10.9.0.1', 80, 1337), 'direct 80', "the proxy's uid goes out untouched");
  assert.equal(dial(POD, '127.0.0.1', 9998), 'direct 9998', 'localhost is not captured');
  assert.equal(dial(EXT, '10.9.0.2', 8080), '15006 10.9.0.2:8080', 'inbound to an app port is redirected to 15006');
  assert.equal(dial(EXT, '10.9.0.2', 15020), '15020 10.9.0.2:15020', 'an excluded inbound port (-d) is reached directly (not on 15006)');
  // 127.0.0.6 → pod IP (the inbound side's hop to the app) is let through to the app.
  const fromSix = inNs(POD, process.execPath, '-e', `const s=require('net').connect({host:'10.9.0.2',port:8080,localAddress:'127.0.0.6'});let d='';s.on('data',(c)=>d+=c);s.on('end',()=>process.stdout.write(d.trim()));s.on('error',(e)=>process.stdout.write('error '+e.code))`);
  assert.equal(fromSix, 'direct 8080');
});

test('different flags are refused while the old rules stand; --reconcile replaces them; outbound port exclusions', { skip }, () => {
  const args = ['-i', '*', '-b', '*', '-d', '15020', '-o', '9998'];
  const refused = skuaIptables(args);
  assert.equal(refused.code, 1);
  assert.match(refused.err, /rules from an earlier run differ from this configuration \(nat:ISTIO_INBOUND has 5 rules, the plan has 3\); rerun with --reconcile/);
  const reconciled = skuaIptables([...args, '--reconcile']);
  assert.equal(reconciled.code, 0, reconciled.err);
  assert.match(reconciled.out, /earlier rules replaced by \d+ rules/);
  const state = saveState();
  assert.match(state, /-A ISTIO_OUTPUT -p tcp -m tcp --dport 9998 -j RETURN/);
  assert.doesNotMatch(state, /--dport 15090/);
  assert.equal(dial(POD, '10.9.0.1', 9998), 'direct 9998', 'an excluded outbound port (-o) is not captured');
  assert.equal(dial(POD, '10.9.0.1', 80), '15001 10.9.0.1:80');
});

test('istio-clean-iptables removes every chain and jump; running it again is harmless', { skip }, () => {
  for (let i = 0; i < 2; i++) {
    const r = skuaIptables([], 'istio-clean-iptables');
    assert.equal(r.code, 0, r.err);
    assert.doesNotMatch(saveState(), /ISTIO/);
  }
  assert.equal(dial(POD, '10.9.0.1', 80), 'direct 80', 'nothing is captured any more');
});

test('IPv6 (--dual-stack): ip6tables gets the same chains with ::6 / ::1, capture works over IPv6, clean-up removes both', { skip }, () => {
  const r = skuaIptables(['--dual-stack', '-i', '*', '-b', '*', '-d', '15020']);
  assert.equal(r.code, 0, r.err);
  assert.equal(r.out, 'IPv4: 16 rules applied; IPv6: 16 rules applied\n');
  const v6 = saveState('ip6tables-save');
  assert.match(v6, /-A ISTIO_OUTPUT -s ::6\/128 -o lo -j RETURN/);
  assert.match(v6, /-A ISTIO_OUTPUT -d ::1\/128 -j RETURN/);
  assert.equal(dial(POD, 'fd00:9::1', 80), '15001 fd00:9::1:80');
  assert.equal(dial(EXT, 'fd00:9::2', 8080), '15006 fd00:9::2:8080');
  assert.equal(skuaIptables(['--dual-stack'], 'istio-clean-iptables').code, 0);
  assert.doesNotMatch(saveState('ip6tables-save'), /ISTIO/);
  assert.doesNotMatch(saveState(), /ISTIO/);
});
