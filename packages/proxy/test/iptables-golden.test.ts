// `skua-proxy istio-iptables --dry-run`: the iptables-restore input for istio-init's command lines,
// compared rule for rule with istio-iptables' output for the same settings (chain creation first,
// tables in alphabetical order, IPv4 then IPv6), plus the flag/env parsing and its refusals.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { dryRunText, runIstioIptables } from '../src/agent/iptables/command.ts';
import { defaultIptablesConfig, parseIptablesConfig, type IptablesConfig } from '../src/agent/iptables/config.ts';
import { planRules } from '../src/agent/iptables/plan.ts';
import type { NetworkInterfaceInfo } from 'node:os';

type Nics = NodeJS.Dict<NetworkInterfaceInfo[]>;

const V4_ONLY: { eth0: NetworkInterfaceInfo[] } = { eth0: [{ address: '10.1.0.5', netmask: '255.255.255.0', family: 'IPv4' as const, mac: '00:00:00:00:00:01', internal: false, cidr: '10.1.0.5/24' }] };
const DUAL: Nics = { eth0: [...V4_ONLY.eth0, { address: 'fd00::5', netmask: 'ffff:ffff:ffff:ffff::', family: 'IPv6' as const, mac: '00:00:00:00:00:01', internal: false, cidr: 'fd00::5/64', scopeid: 0 }] };

function dryRun(argv: string[], env: Record<string, string> = {}, interfaces: Nics = V4_ONLY, resolvConf = 'nameserver 127.0.0.53\n'): { code: number; out: string; err: string } {
  let out = '', err = '';
  const code = runIstioIptables(['--dry-run', ...argv], { env, out: (s) => { out += s; }, err: (s) => { err += s; }, interfaces, resolvConf });
  return { code, out, err };
}

const lines = (s: string): string[] => s.trim().split('\n');
const planText = (over: Partial<IptablesConfig>): string[] => { const cfg = defaultIptablesConfig(over); return lines(dryRunText(cfg, planRules(cfg))); };

const COMMON_HEAD = ['* nat', '-N ISTIO_INBOUND', '-N ISTIO_REDIRECT', '-N ISTIO_IN_REDIRECT', '-N ISTIO_OUTPUT',
  '-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN', '-A ISTIO_REDIRECT -p tcp -j REDIRECT --to-ports 15001', '-A ISTIO_IN_REDIRECT -p tcp -j REDIRECT --to-ports 15006'];
const OWNER_1337 = [
  '-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN',
  '-A ISTIO_OUTPUT -o lo ! -d 127.0.0.1/32 -p tcp ! --dport 15008 -m owner --uid-owner 1337 -j ISTIO_IN_REDIRECT',
  '-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN',
  '-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN',
  '-A ISTIO_OUTPUT -o lo ! -d 127.0.0.1/32 -p tcp ! --dport 15008 -m owner --gid-owner 1337 -j ISTIO_IN_REDIRECT',
  '-A ISTIO_OUTPUT -o lo -m owner ! --gid-owner 1337 -j RETURN',
  '-A ISTIO_OUTPUT -m owner --gid-owner 1337 -j RETURN',
];

test("the injector's istio-init command line (seed 002): inbound all but the status ports, outbound all", () => {
  const r = dryRun(['-p', '15001', '-z', '15006', '-u', '1337', '-m', 'REDIRECT', '-i', '*', '-x', '', '-b', '*', '-d', '15090,15021,15020']);
  assert.equal(r.code, 0, r.err);
  assert.deepEqual(lines(r.out), [
    '# iptables-restore --noflush', ...COMMON_HEAD,
    '-A PREROUTING -p tcp -j ISTIO_INBOUND',
    '-A ISTIO_INBOUND -p tcp --dport 15090 -j RETURN',
    '-A ISTIO_INBOUND -p tcp --dport 15021 -j RETURN',
    '-A ISTIO_INBOUND -p tcp --dport 15020 -j RETURN',
    '-A ISTIO_INBOUND -p tcp -j ISTIO_IN_REDIRECT',
    '-A OUTPUT -j ISTIO_OUTPUT', ...OWNER_1337,
    '-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN',
    '-A ISTIO_OUTPUT -j ISTIO_REDIRECT',
    'COMMIT',
  ]);
});

test('no flags: the chains and the owner exemptions only (nothing is captured)', () => {
  assert.deepEqual(planText({}), ['# iptables-restore --noflush', ...COMMON_HEAD, '-A OUTPUT -j ISTIO_OUTPUT', ...OWNER_1337, '-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN', 'COMMIT']);
});

test('DNS capture to resolv.conf servers with several uids/gids, CIDR include/exclude: nat + raw conntrack zones', () => {
  const r = dryRun(['--redirect-dns', '-u', '3,4', '-g', '1,2', '-x', '1.1.0.0/16', '-i', '9.9.0.0/16']);
  assert.equal(r.code, 0, r.err);
  const uid = (n: string): string[] => [
    `-A ISTIO_OUTPUT -o lo ! -d 127.0.0.1/32 -p tcp -m multiport ! --dports 53,15008 -m owner --uid-owner ${n} -j ISTIO_IN_REDIRECT`,
    `-A ISTIO_OUTPUT -o lo -p tcp ! --dport 53 -m owner ! --uid-owner ${n} -j RETURN`,
    `-A ISTIO_OUTPUT -m owner --uid-owner ${n} -j RETURN`,
  ];
  const gid = (n: string): string[] => [
    `-A ISTIO_OUTPUT -o lo ! -d 127.0.0.1/32 -p tcp ! --dport 15008 -m owner --gid-owner ${n} -j ISTIO_IN_REDIRECT`,
    `-A ISTIO_OUTPUT -o lo -p tcp ! --dport 53 -m owner ! --gid-owner ${n} -j RETURN`,
    `-A ISTIO_OUTPUT -m owner --gid-owner ${n} -j RETURN`,
  ];
  const zones = (m: string, n: string): string[] => [
    `-A ISTIO_OUTPUT_DNS -p udp --dport 53 -m owner ${m} ${n} -j CT --zone 1`,
    `-A ISTIO_OUTPUT_DNS -p udp --sport 15053 -m owner ${m} ${n} -j CT --zone 2`,
  ];
  assert.deepEqual(lines(r.out), [
    '# iptables-restore --noflush', '* nat', '-N ISTIO_INBOUND', '-N ISTIO_REDIRECT', '-N ISTIO_IN_REDIRECT', '-N ISTIO_OUTPUT', '-N ISTIO_OUTPUT_DNS',
    ...COMMON_HEAD.slice(5),
    '-A OUTPUT -j ISTIO_OUTPUT', '-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN', ...uid('3'), ...uid('4'), ...gid('1'), ...gid('2'),
    '-A ISTIO_OUTPUT -j ISTIO_OUTPUT_DNS',
    '-A ISTIO_OUTPUT_DNS -p tcp --dport 53 -d 127.0.0.53/32 -j REDIRECT --to-ports 15053',
    '-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d 127.0.0.53/32 -j REDIRECT --to-port 15053',
    '-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN',
    '-A ISTIO_OUTPUT -d 1.1.0.0/16 -j RETURN',
    '-A ISTIO_OUTPUT -d 9.9.0.0/16 -j ISTIO_REDIRECT',
    'COMMIT',
    '* raw', '-N ISTIO_OUTPUT_DNS', '-N ISTIO_INBOUND',
    '-A OUTPUT -j ISTIO_OUTPUT_DNS', ...zones('--uid-owner', '3'), ...zones('--uid-owner', '4'), ...zones('--gid-owner', '1'), ...zones('--gid-owner', '2'),
    '-A PREROUTING -j ISTIO_INBOUND',
    '-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d 127.0.0.53/32 -j CT --zone 2',
    '-A ISTIO_INBOUND -p udp --sport 53 -s 127.0.0.53/32 -j CT --zone 1',
    'COMMIT',
  ]);
});

test('IPv6: a pod whose address is IPv6 (or --dual-stack) gets the ip6tables rules with ::6 and ::1', () => {
  const r = dryRun(['--dual-stack', '-i', '*', '-b', '8080'], {}, DUAL);
  assert.equal(r.code, 0, r.err);
  const [v4, v6] = r.out.split('# ip6tables-restore --noflush\n');
  assert.ok(v6, 'IPv6 section printed');
  assert.ok(v4.includes('-A ISTIO_OUTPUT -o lo -s 127.0.0.6/32 -j RETURN'));
  assert.deepEqual(lines(v6).filter((l) => l.startsWith('-A ISTIO_OUTPUT') || l.startsWith('-A ISTIO_INBOUND')), [
    '-A ISTIO_INBOUND -p tcp --dport 15008 -j RETURN',
    '-A ISTIO_INBOUND -p tcp --dport 8080 -j ISTIO_IN_REDIRECT',
    '-A ISTIO_OUTPUT -o lo -s ::6/128 -j RETURN',
    '-A ISTIO_OUTPUT -o lo ! -d ::1/128 -p tcp ! --dport 15008 -m owner --uid-owner 1337 -j ISTIO_IN_REDIRECT',
    '-A ISTIO_OUTPUT -o lo -m owner ! --uid-owner 1337 -j RETURN',
    '-A ISTIO_OUTPUT -m owner --uid-owner 1337 -j RETURN',
    '-A ISTIO_OUTPUT -o lo ! -d ::1/128 -p tcp ! --dport 15008 -m owner --gid-owner 1337 -j ISTIO_IN_REDIRECT',
    '-A ISTIO_OUTPUT -o lo -m owner ! --gid-owner 1337 -j RETURN',
    '-A ISTIO_OUTPUT -m owner --gid-owner 1337 -j RETURN',
    '-A ISTIO_OUTPUT -d ::1/128 -j RETURN',
    '-A ISTIO_OUTPUT -j ISTIO_REDIRECT',
  ]);
  // An IPv4-only pod writes no IPv6 rules at all.
  assert.doesNotMatch(dryRun(['-i', '*']).out, /ip6tables/);
});

test('excluded outbound ports, outbound port includes, NIC exclusions, virtual interfaces, drop-invalid, owner groups', () => {
  const out = planText({ outboundPortsExclude: '9998', outboundPortsInclude: '32000', excludeInterfaces: 'eth9', rerouteVirtualInterfaces: 'eth1', outboundIpRangesInclude: '*', dropInvalid: true, ownerGroupsExclude: '888' });
  assert.deepEqual(out.filter((l) => !OWNER_1337.includes(l)), [
    '# iptables-restore --noflush',
    '* mangle', '-N ISTIO_DROP', '-A PREROUTING -m conntrack --ctstate INVALID -j ISTIO_DROP', '-A ISTIO_DROP -j DROP', 'COMMIT',
    ...COMMON_HEAD.slice(0, 5),
    '-A PREROUTING -i eth9 -j RETURN', '-A OUTPUT -o eth9 -j RETURN', '-I PREROUTING 1 -i eth1 -j RETURN',
    ...COMMON_HEAD.slice(5),
    '-A OUTPUT -j ISTIO_OUTPUT',
    '-A ISTIO_OUTPUT -p tcp --dport 9998 -j RETURN', '-A ISTIO_OUTPUT -p udp --dport 9998 -j RETURN',
    '-A ISTIO_OUTPUT -m owner --gid-owner 888 -j RETURN',
    '-A ISTIO_OUTPUT -d 127.0.0.1/32 -j RETURN',
    '-A ISTIO_OUTPUT -p tcp --dport 32000 -j ISTIO_REDIRECT',
    '-A ISTIO_OUTPUT -j ISTIO_REDIRECT',
    '-I PREROUTING 1 -i eth1 -j ISTIO_REDIRECT',
    'COMMIT',
  ]);
  // Only some groups captured: one rule that returns everything from any other group.
  assert.ok(planText({ ownerGroupsInclude: 'java,202' }).includes('-A ISTIO_OUTPUT -m owner ! --gid-owner java -m owner ! --gid-owner 202 -j RETURN'));
  // Loopback explicitly captured: the "lo, not the proxy → RETURN" shortcut goes away.
  assert.ok(!planText({ outboundIpRangesInclude: '127.1.2.3/32' }).some((l) => l.includes('-o lo -m owner !')));
});

test('flags win over their environment variables; ISTIO_META_DNS_CAPTURE turns DNS capture on', () => {
  const env = { PROXY_UID: '7', ISTIO_INBOUND_PORTS: '9080', ISTIO_META_DNS_CAPTURE: 'true', ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR: '127.0.0.1/8' };
  const cfg = parseIptablesConfig({ argv: ['-u', '8'], env, interfaces: V4_ONLY, resolvConf: 'search default.svc\nnameserver 10.96.0.10\nnameserver fd00::10\n' });
  assert.equal(cfg.proxyUid, '8');
  assert.equal(cfg.proxyGid, '8');
  assert.equal(cfg.inboundPortsInclude, '9080');
  assert.equal(cfg.redirectDns, true);
  assert.deepEqual([cfg.dnsServersV4, cfg.dnsServersV6], [['10.96.0.10'], ['fd00::10']]);
  const text = dryRunText(cfg, planRules(cfg));
  assert.match(text, /-A ISTIO_OUTPUT_DNS -p udp --dport 53 -d 10\.96\.0\.10\/32 -j REDIRECT --to-port 15053/);
  assert.match(text, /-A ISTIO_OUTPUT -d 127\.0\.0\.1\/8 -j RETURN/);
  // Without a uid flag or env, ENVOY_USER's uid from /etc/passwd, else 1337.
  assert.equal(parseIptablesConfig({ argv: [], env: {}, interfaces: V4_ONLY, passwd: 'istio-proxy:x:1234:1234::/:/bin/false\n' }).proxyUid, '1234');
  assert.equal(parseIptablesConfig({ argv: [], env: {}, interfaces: V4_ONLY, passwd: '' }).proxyUid, '1337');
});

test('bad settings are refused naming the flag, before any rule is planned', () => {
  const cases: Array<[string[], RegExp]> = [
    [['-p', 'http'], /--envoy-port: invalid port "http"/],
    [['-z', '70000'], /--inbound-capture-port: invalid port "70000"/],
    [['-b', '80,x'], /--istio-inbound-ports: invalid port "x"/],
    [['-i', '10.0.0.0/33'], /--istio-service-cidr: invalid CIDR "10\.0\.0\.0\/33"/],
    [['-x', '*'], /--istio-service-exclude-cidr: "\*" is not allowed/],
    [['-u', 'proxy'], /--proxy-uid: expected numeric ids/],
    [['-m', 'TPROXY'], /TPROXY is not supported by skua-proxy yet/],
    [['-m', 'DNAT'], /expected REDIRECT or TPROXY, got "DNAT"/],
    [["--redirect-dns=maybe"], /invalid argument "maybe" for "--redirect-dns" flag: not a boolean/],
    [['--no-such-flag'], /unknown flag: --no-such-flag/],
  ];
  for (const [argv, re] of cases) {
    const r = dryRun(argv);
    assert.equal(r.code, 1, argv.join(' '));
    assert.match(r.err, re);
    assert.equal(r.out, '', 'nothing printed on stdout');
  }
  // A pod without any usable address: the same refusal as istio-iptables, without the usage text.
  const none = dryRun([], {}, { lo: [{ ...V4_ONLY.eth0[0], address: '127.0.0.1', internal: true }] });
  assert.equal(none.code, 1);
  assert.equal(none.err, 'Error: no valid local IP address found\n');
});
