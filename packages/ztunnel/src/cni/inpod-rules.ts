/**
 * Ambient's in-pod redirection, applied inside each pod's network namespace (seed 001: "inpod
 * redirection"): outbound TCP goes to ztunnel's 15001, inbound TCP (except 15008) to 15006, DNS
 * to 15053, and ztunnel's own sockets (mark 0x539) pass untouched. Inbound connections ztunnel
 * accepted carry connmark 0x111 so their replies (and spoofed-source upstreams) route back through
 * the pod's local table. The kubelet's probe address 169.254.7.127 is never redirected.
 */

export interface InpodRuleOptions {
  readonly mark?: number;
  readonly outboundPort?: number;
  readonly inboundPlaintextPort?: number;
  readonly inboundPort?: number;
  readonly dnsPort?: number;
  /** Redirect DNS to ztunnel (the pod's DNS capture). */
  readonly dns?: boolean;
  readonly probeAddress?: string;
}

const hex = (n: number): string => `0x${n.toString(16)}`;

/** iptables-restore input (--noflush) for one pod's namespace. */
export function inpodIptables(o: InpodRuleOptions = {}): string {
  const mark = `${hex(o.mark ?? 0x539)}/0xfff`;
  const conn = '0x111/0xfff';
  const probe = `${o.probeAddress ?? '169.254.7.127'}/32`;
  const out = o.outboundPort ?? 15001, plain = o.inboundPlaintextPort ?? 15006, hbone = o.inboundPort ?? 15008, dns = o.dnsPort ?? 15053;
  const lines = [
    '*mangle',
    ':PREROUTING ACCEPT [0:0]', ':INPUT ACCEPT [0:0]', ':FORWARD ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ':POSTROUTING ACCEPT [0:0]',
    ':ISTIO_OUTPUT - [0:0]', ':ISTIO_PRERT - [0:0]',
    '-A PREROUTING -j ISTIO_PRERT',
    '-A OUTPUT -j ISTIO_OUTPUT',
    `-A ISTIO_OUTPUT -m connmark --mark ${conn} -j CONNMARK --restore-mark --nfmask 0xffffffff --ctmask 0xffffffff`,
    `-A ISTIO_PRERT -m mark --mark ${mark} -j CONNMARK --set-xmark ${conn}`,
    'COMMIT',
    '*nat',
    ':PREROUTING ACCEPT [0:0]', ':INPUT ACCEPT [0:0]', ':OUTPUT ACCEPT [0:0]', ':POSTROUTING ACCEPT [0:0]',
    ':ISTIO_OUTPUT - [0:0]', ':ISTIO_PRERT - [0:0]',
    '-A OUTPUT -j ISTIO_OUTPUT',
    '-A PREROUTING -j ISTIO_PRERT',
    `-A ISTIO_OUTPUT -d ${probe} -p tcp -m tcp -j ACCEPT`,
    ...(o.dns === false ? [] : [
      `-A ISTIO_OUTPUT ! -o lo -p udp -m mark ! --mark ${mark} -m udp --dport 53 -j REDIRECT --to-ports ${dns}`,
      `-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m tcp --dport 53 -m mark ! --mark ${mark} -j REDIRECT --to-ports ${dns}`,
    ]),
    `-A ISTIO_OUTPUT -p tcp -m mark --mark ${conn} -j ACCEPT`,
    '-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -o lo -j ACCEPT',
    `-A ISTIO_OUTPUT ! -d 127.0.0.1/32 -p tcp -m mark ! --mark ${mark} -j REDIRECT --to-ports ${out}`,
    `-A ISTIO_PRERT -s ${probe} -p tcp -m tcp -j ACCEPT`,
    `-A ISTIO_PRERT ! -d 127.0.0.1/32 -p tcp ! --dport ${hbone} -m mark ! --mark ${mark} -j REDIRECT --to-ports ${plain}`,
    'COMMIT',
    '',
  ];
  return lines.join('\n');
}

/** The routing that goes with the rules: marked connections look up a table where everything is local. */
export const INPOD_ROUTES: ReadonlyArray<readonly string[]> = [
  ['route', 'add', 'local', '0.0.0.0/0', 'dev', 'lo', 'table', '100'],
  ['rule', 'add', 'fwmark', '0x111/0xfff', 'pref', '32764', 'lookup', '100'],
];
