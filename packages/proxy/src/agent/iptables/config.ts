/**
 * istio-iptables' settings: the same flags (short and long), the same environment variables
 * behind them (a flag wins over its variable), the same defaults. Checked once, up front:
 * a bad port, CIDR or mode is a UsageError naming the flag, before any rule is touched.
 */
import { readFileSync } from 'node:fs';
import { isIP } from 'node:net';
import { networkInterfaces, type NetworkInterfaceInfo } from 'node:os';
import { UsageError } from '../cli.ts';
import { LOG_FLAGS, parseFlags, type FlagKind } from '../pilot-cli.ts';
import { parseGoBool } from '../metadata-fields.ts';

export interface IptablesConfig {
  readonly proxyPort: string;
  readonly inboundCapturePort: string;
  readonly inboundTunnelPort: string;
  /** Comma-separated uids / gids whose traffic is never captured (the proxy's). */
  readonly proxyUid: string;
  readonly proxyGid: string;
  readonly inboundInterceptionMode: 'REDIRECT';
  readonly inboundPortsInclude: string;
  readonly inboundPortsExclude: string;
  readonly ownerGroupsInclude: string;
  readonly ownerGroupsExclude: string;
  readonly outboundPortsInclude: string;
  readonly outboundPortsExclude: string;
  readonly outboundIpRangesInclude: string;
  readonly outboundIpRangesExclude: string;
  readonly rerouteVirtualInterfaces: string;
  readonly excludeInterfaces: string;
  readonly dryRun: boolean;
  readonly redirectDns: boolean;
  readonly captureAllDns: boolean;
  readonly dropInvalid: boolean;
  readonly dualStack: boolean;
  readonly enableIpv6: boolean;
  readonly dnsServersV4: readonly string[];
  readonly dnsServersV6: readonly string[];
  readonly networkNamespace: string;
  readonly hostIpv4LoopbackCidr: string;
  readonly reconcile: boolean;
  readonly cleanupOnly: boolean;
  readonly forceApply: boolean;
  readonly skipRuleApply: boolean;
  /** '' (the system's iptables), iptables-legacy or iptables-nft. */
  readonly iptablesBinary: string;
}

/** Long name → [short name, kind, environment variable(s)]. Long names are istio-iptables' own. */
const FLAGS: Readonly<Record<string, readonly [string, FlagKind, ...string[]]>> = {
  'envoy-port': ['p', 'string'],
  'inbound-capture-port': ['z', 'string', 'INBOUND_CAPTURE_PORT'],
  'inbound-tunnel-port': ['e', 'string', 'INBOUND_TUNNEL_PORT'],
  'proxy-uid': ['u', 'string', 'PROXY_UID'],
  'proxy-gid': ['g', 'string', 'PROXY_GID'],
  'istio-inbound-interception-mode': ['m', 'string', 'ISTIO_INBOUND_INTERCEPTION_MODE'],
  'istio-inbound-ports': ['b', 'string', 'ISTIO_INBOUND_PORTS'],
  'istio-local-exclude-ports': ['d', 'string', 'ISTIO_LOCAL_EXCLUDE_PORTS'],
  'istio-exclude-interfaces': ['c', 'string', 'ISTIO_EXCLUDE_INTERFACES'],
  'istio-service-cidr': ['i', 'string', 'ISTIO_SERVICE_CIDR'],
  'istio-service-exclude-cidr': ['x', 'string', 'ISTIO_SERVICE_EXCLUDE_CIDR'],
  'istio-outbound-ports': ['q', 'string', 'ISTIO_OUTBOUND_PORTS'],
  'istio-local-outbound-ports-exclude': ['o', 'string', 'ISTIO_LOCAL_OUTBOUND_PORTS_EXCLUDE'],
  'kube-virt-interfaces': ['k', 'string', 'KUBE_VIRT_INTERFACES'],
  'istio-inbound-tproxy-mark': ['t', 'string', 'ISTIO_INBOUND_TPROXY_MARK'],
  'istio-inbound-tproxy-route-table': ['r', 'string', 'ISTIO_INBOUND_TPROXY_ROUTE_TABLE'],
  'dry-run': ['n', 'bool', 'DRY_RUN'],
  'redirect-dns': ['', 'bool', 'REDIRECT_DNS', 'ISTIO_META_DNS_CAPTURE'],
  'capture-all-dns': ['', 'bool', 'CAPTURE_ALL_DNS'],
  'drop-invalid': ['', 'bool', 'DROP_INVALID', 'INVALID_DROP'],
  'dual-stack': ['', 'bool', 'DUAL_STACK', 'ISTIO_DUAL_STACK'],
  'network-namespace': ['', 'string', 'NETWORK_NAMESPACE'],
  reconcile: ['', 'bool', 'RECONCILE'],
  'cleanup-only': ['', 'bool', 'CLEANUP_ONLY'],
  'force-apply': ['', 'bool', 'FORCE_APPLY'],
  'skip-rule-apply': ['', 'bool', 'SKIP_RULE_APPLY'],
  'force-iptables-binary': ['', 'string', 'FORCE_IPTABLES_BINARY'],
  // Accepted for compatibility; the checks they drive are not made here (see USAGE).
  'run-validation': ['', 'bool', 'RUN_VALIDATION'],
  'iptables-probe-port': ['', 'string', 'IPTABLES_PROBE_PORT'],
  'probe-timeout': ['', 'string', 'PROBE_TIMEOUT'],
  'cni-mode': ['', 'bool', 'CNI_MODE'],
  'native-nftables': ['', 'bool', 'NATIVE_NFTABLES'],
  'iptables-trace-logging': ['', 'bool', 'IPTABLES_TRACE_LOGGING'],
  help: ['h', 'bool'],
};

const KNOWN: Record<string, FlagKind> = { ...LOG_FLAGS };
for (const [long, [short, kind]] of Object.entries(FLAGS)) {
  KNOWN[long] = kind;
  if (short) KNOWN[short] = kind;
}

/** The host (interfaces, resolv.conf) cannot support the settings: an error without the usage text. */
export class HostError extends Error {}

export type Env = Readonly<Record<string, string | undefined>>;

export interface IptablesInputs {
  readonly argv: readonly string[];
  readonly env: Env;
  /** Host interfaces (tests pass a fixed set). */
  readonly interfaces?: NodeJS.Dict<NetworkInterfaceInfo[]>;
  /** resolv.conf text (tests pass one); read from /etc/resolv.conf when DNS capture needs it. */
  readonly resolvConf?: string;
  /** /etc/passwd text, for ENVOY_USER's uid. */
  readonly passwd?: string;
}

/** Splits a comma list, dropping empty items (istio's config.Split). */
export function splitList(s: string): string[] {
  return s === '' ? [] : s.split(',').filter((x) => x !== '');
}

function checkPort(flag: string, v: string): void {
  if (!/^\d+$/.test(v) || Number(v) < 1 || Number(v) > 65535) throw new UsageError(`--${flag}: invalid port "${v}"`);
}

function checkPortList(flag: string, v: string, wildcard: boolean): void {
  if (wildcard && v === '*') return;
  for (const p of splitList(v)) checkPort(flag, p);
}

/** An IPv4 or IPv6 prefix `addr/len` (a bare address is refused, as netip.ParsePrefix does). */
export function parseCidr(s: string): { address: string; bits: number; v6: boolean } | undefined {
  const slash = s.indexOf('/');
  if (slash < 0) return undefined;
  const address = s.slice(0, slash);
  const family = isIP(address);
  const len = s.slice(slash + 1);
  if (family === 0 || !/^\d+$/.test(len)) return undefined;
  const bits = Number(len);
  if (bits > (family === 6 ? 128 : 32)) return undefined;
  return { address, bits, v6: family === 6 };
}

function checkCidrList(flag: string, v: string, wildcardOk: boolean): void {
  if (v === '*') {
    if (!wildcardOk) throw new UsageError(`--${flag}: "*" is not allowed here (invalid value for OUTBOUND_IP_RANGES_EXCLUDE)`);
    return;
  }
  for (const c of splitList(v)) if (!parseCidr(c)) throw new UsageError(`--${flag}: invalid CIDR "${c}"`);
}

function checkIdList(flag: string, v: string): void {
  const ids = splitList(v);
  if (ids.length === 0 || ids.some((x) => !/^\d+$/.test(x))) throw new UsageError(`--${flag}: expected numeric ids separated by commas, got "${v}"`);
}

/** `nameserver` lines of a resolv.conf, split by family (zone suffixes dropped). */
export function resolvConfServers(text: string): { v4: string[]; v6: string[] } {
  const v4: string[] = [], v6: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^\s*nameserver\s+(\S+)/.exec(line);
    if (!m) continue;
    const ip = m[1].replace(/%.*$/, '');
    const f = isIP(ip);
    if (f === 4) v4.push(ip);
    else if (f === 6) v6.push(ip);
  }
  return { v4, v6 };
}

/**
 * IPv6 rules are written when the pod's first usable address is IPv6 (istio-iptables'
 * getLocalIP): not loopback or link-local. With dual stack, any IPv6 address counts.
 */
export function detectIpv6(interfaces: NodeJS.Dict<NetworkInterfaceInfo[]>, dualStack: boolean): boolean {
  let found = false;
  for (const list of Object.values(interfaces)) {
    for (const a of list ?? []) {
      if (a.internal) continue;
      if (a.family === 'IPv6' && /^fe[89ab]/i.test(a.address)) continue;
      if (a.family === 'IPv4' && a.address.startsWith('169.254.')) continue;
      if (!dualStack) return a.family === 'IPv6';
      found = true;
      if (a.family === 'IPv6') return true;
    }
  }
  if (!found && !dualStack) throw new HostError('no valid local IP address found');
  return false;
}

function uidOf(passwd: string, user: string): string | undefined {
  for (const line of passwd.split('\n')) {
    const f = line.split(':');
    if (f[0] === user && /^\d+$/.test(f[2] ?? '')) return f[2];
  }
  return undefined;
}

export function parseIptablesConfig(inputs: IptablesInputs): IptablesConfig {
  const { env } = inputs;
  const p = parseFlags(inputs.argv, KNOWN);
  if (p.unknown.length) throw new UsageError(`unknown flag: --${p.unknown[0]}`);
  if (p.positional.length) throw new UsageError(`unexpected arguments: ${p.positional.join(' ')}`);
  if (p.values.has('help') || p.values.has('h')) throw new UsageError('');
  const str = (long: string, def: string): string => {
    const [short, , ...envs] = FLAGS[long];
    const v = p.values.get(long) ?? (short ? p.values.get(short) : undefined);
    if (v !== undefined) return v;
    for (const e of envs) if (env[e] !== undefined) return env[e] as string;
    return def;
  };
  const bool = (long: string): boolean => {
    const v = str(long, 'false');
    const b = parseGoBool(v);
    if (b === undefined) throw new UsageError(`--${long}: invalid boolean "${v}"`);
    return b;
  };
  const mode = str('istio-inbound-interception-mode', env.INBOUND_INTERCEPTION_MODE ?? '') || 'REDIRECT';
  if (mode === 'TPROXY') throw new UsageError('--istio-inbound-interception-mode: TPROXY is not supported by skua-proxy yet; use REDIRECT');
  if (mode !== 'REDIRECT') throw new UsageError(`--istio-inbound-interception-mode: expected REDIRECT or TPROXY, got "${mode}"`);
  if (bool('native-nftables')) throw new UsageError('--native-nftables: nftables rules are not supported by skua-proxy yet');
  const binary = str('force-iptables-binary', '');
  if (binary !== '' && binary !== 'iptables-legacy' && binary !== 'iptables-nft') {
    throw new UsageError(`--force-iptables-binary: expected iptables-legacy or iptables-nft, got "${binary}"`);
  }

  const proxyPort = str('envoy-port', '15001');
  const inboundCapturePort = str('inbound-capture-port', '15006');
  const inboundTunnelPort = str('inbound-tunnel-port', '15008');
  checkPort('envoy-port', proxyPort);
  checkPort('inbound-capture-port', inboundCapturePort);
  checkPort('inbound-tunnel-port', inboundTunnelPort);
  const inboundPortsInclude = str('istio-inbound-ports', '');
  const inboundPortsExclude = str('istio-local-exclude-ports', '');
  const outboundPortsInclude = str('istio-outbound-ports', '');
  const outboundPortsExclude = str('istio-local-outbound-ports-exclude', '');
  checkPortList('istio-inbound-ports', inboundPortsInclude, true);
  checkPortList('istio-local-exclude-ports', inboundPortsExclude, false);
  checkPortList('istio-outbound-ports', outboundPortsInclude, false);
  checkPortList('istio-local-outbound-ports-exclude', outboundPortsExclude, false);
  const outboundIpRangesInclude = str('istio-service-cidr', '');
  const outboundIpRangesExclude = str('istio-service-exclude-cidr', '');
  checkCidrList('istio-service-cidr', outboundIpRangesInclude, true);
  checkCidrList('istio-service-exclude-cidr', outboundIpRangesExclude, false);

  let proxyUid = str('proxy-uid', '');
  if (proxyUid === '') {
    let passwd = inputs.passwd;
    if (passwd === undefined) { try { passwd = readFileSync('/etc/passwd', 'utf8'); } catch { passwd = ''; } }
    proxyUid = uidOf(passwd, env.ENVOY_USER ?? 'istio-proxy') ?? '1337';
  }
  const proxyGid = str('proxy-gid', '') || proxyUid;
  checkIdList('proxy-uid', proxyUid);
  checkIdList('proxy-gid', proxyGid);

  const hostIpv4LoopbackCidr = env.ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR ?? '127.0.0.1/32';
  const loop = parseCidr(hostIpv4LoopbackCidr);
  if (!loop || loop.v6 || !loop.address.startsWith('127.') || loop.bits < 8) {
    throw new UsageError(`ISTIO_OUTBOUND_IPV4_LOOPBACK_CIDR: expected a CIDR within 127.0.0.0/8, got "${hostIpv4LoopbackCidr}"`);
  }
  const ownerGroupsInclude = env.ISTIO_OUTBOUND_OWNER_GROUPS ?? '*';
  const ownerGroupsExclude = env.ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE ?? '';
  if (ownerGroupsInclude !== '*' && ownerGroupsExclude !== '') {
    throw new UsageError('ISTIO_OUTBOUND_OWNER_GROUPS_EXCLUDE: only applies when ISTIO_OUTBOUND_OWNER_GROUPS is "*"');
  }

  const dualStack = bool('dual-stack');
  const dryRun = bool('dry-run');
  const redirectDns = bool('redirect-dns');
  const captureAllDns = bool('capture-all-dns');
  let dns = { v4: [] as string[], v6: [] as string[] };
  if (redirectDns && !captureAllDns) {
    let text = inputs.resolvConf;
    if (text === undefined) {
      try { text = readFileSync('/etc/resolv.conf', 'utf8'); } catch (e) { throw new HostError(`failed to load /etc/resolv.conf: ${(e as Error).message}`); }
    }
    dns = resolvConfServers(text);
  }
  return {
    proxyPort, inboundCapturePort, inboundTunnelPort, proxyUid, proxyGid, inboundInterceptionMode: 'REDIRECT',
    inboundPortsInclude, inboundPortsExclude, ownerGroupsInclude, ownerGroupsExclude, outboundPortsInclude, outboundPortsExclude,
    outboundIpRangesInclude, outboundIpRangesExclude,
    rerouteVirtualInterfaces: str('kube-virt-interfaces', ''), excludeInterfaces: str('istio-exclude-interfaces', ''),
    dryRun, redirectDns, captureAllDns, dropInvalid: bool('drop-invalid'), dualStack,
    enableIpv6: detectIpv6(inputs.interfaces ?? networkInterfaces(), dualStack),
    dnsServersV4: dns.v4, dnsServersV6: dns.v6, networkNamespace: str('network-namespace', ''), hostIpv4LoopbackCidr,
    reconcile: bool('reconcile'), cleanupOnly: bool('cleanup-only'), forceApply: bool('force-apply'), skipRuleApply: bool('skip-rule-apply'),
    iptablesBinary: binary,
  };
}

/** The settings with istio-iptables' defaults (for tests and callers that build a config in code). */
export function defaultIptablesConfig(over: Partial<IptablesConfig> = {}): IptablesConfig {
  return {
    proxyPort: '15001', inboundCapturePort: '15006', inboundTunnelPort: '15008', proxyUid: '1337', proxyGid: '1337',
    inboundInterceptionMode: 'REDIRECT', inboundPortsInclude: '', inboundPortsExclude: '', ownerGroupsInclude: '*', ownerGroupsExclude: '',
    outboundPortsInclude: '', outboundPortsExclude: '', outboundIpRangesInclude: '', outboundIpRangesExclude: '',
    rerouteVirtualInterfaces: '', excludeInterfaces: '', dryRun: false, redirectDns: false, captureAllDns: false, dropInvalid: false,
    dualStack: false, enableIpv6: false, dnsServersV4: [], dnsServersV6: [], networkNamespace: '', hostIpv4LoopbackCidr: '127.0.0.1/32',
    reconcile: false, cleanupOnly: false, forceApply: false, skipRuleApply: false, iptablesBinary: '', ...over,
  };
}

export const IPTABLES_USAGE = `usage: skua-proxy istio-iptables [flags]   (istio-init's istio-iptables; the same flags and environment)
  -p, --envoy-port PORT                      outbound capture port (15001)
  -z, --inbound-capture-port PORT            inbound capture port (15006)
  -e, --inbound-tunnel-port PORT             HBONE tunnel port, never captured (15008)
  -u, --proxy-uid UIDS  -g, --proxy-gid GIDS the proxy's ids, never captured (ENVOY_USER's uid, else 1337)
  -m, --istio-inbound-interception-mode M    REDIRECT (TPROXY is not supported yet)
  -b, --istio-inbound-ports PORTS|*          inbound ports to capture   -d, --istio-local-exclude-ports PORTS
  -i, --istio-service-cidr CIDRS|*           outbound ranges to capture -x, --istio-service-exclude-cidr CIDRS
  -q, --istio-outbound-ports PORTS           outbound ports to capture  -o, --istio-local-outbound-ports-exclude PORTS
  -c, --istio-exclude-interfaces NICS        -k, --kube-virt-interfaces NICS
  --redirect-dns  --capture-all-dns  --drop-invalid  --dual-stack  --network-namespace PATH
  -n, --dry-run (print the iptables-restore input)  --reconcile  --cleanup-only  --force-apply  --skip-rule-apply
  --force-iptables-binary iptables-legacy|iptables-nft
  (--run-validation, --iptables-probe-port, --probe-timeout, --cni-mode are accepted and change nothing)
       skua-proxy istio-clean-iptables [the same flags]   remove the rules and chains`;

