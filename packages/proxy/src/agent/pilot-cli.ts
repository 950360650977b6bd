/**
 * pilot-agent's command line (cobra/pflag style): `proxy [sidecar|router|waypoint] [flags]`
 * and `wait [flags]`. Like pilot-agent, unknown flags are tolerated (a warning, not an error),
 * so injector templates written for newer Istio versions still start.
 */
import { UsageError } from './cli.ts';

export interface PilotProxyArgs {
  readonly type: string | undefined;
  readonly domain: string;
  readonly meshConfigFile: string;
  readonly serviceCluster: string;
  readonly proxyLogLevel: string;
  readonly proxyComponentLogLevel: string;
  readonly logOutputLevel: string;
  /** 0 = not given (ProxyConfig.concurrency decides). */
  readonly concurrency: number;
  readonly stsPort: number;
  readonly templateFile: string;
  readonly outlierLogPath: string;
  /** --log_as_json: Istio's JSON log lines. */
  readonly logAsJson: boolean;
  readonly unknownFlags: readonly string[];
}

export interface PilotWaitArgs {
  readonly timeoutSeconds: number;
  readonly requestTimeoutMillis: number;
  readonly periodMillis: number;
  readonly url: string;
}

export type FlagKind = 'string' | 'int' | 'bool';

export interface Parsed {
  readonly values: Map<string, string>;
  readonly positional: string[];
  readonly unknown: string[];
}

/** pflag: `--name value`, `--name=value`, bare `--bool`; `--` ends the flags. */
export function parseFlags(argv: readonly string[], known: Readonly<Record<string, FlagKind>>): Parsed {
  const values = new Map<string, string>();
  const positional: string[] = [];
  const unknown: string[] = [];
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--') { positional.push(...argv.slice(i + 1)); break; }
    if (!a.startsWith('-') || a === '-') { positional.push(a); continue; }
    const body = a.replace(/^--?/, '');
    const eq = body.indexOf('=');
    const name = eq < 0 ? body : body.slice(0, eq);
    const kind = known[name];
    let value: string | undefined = eq < 0 ? undefined : body.slice(eq + 1);
    if (!kind) {
      // pflag's unknown-flag skipping: a following non-flag word is taken as its value.
      if (value === undefined && i + 1 < argv.length && !argv[i + 1].startsWith('-')) i++;
      unknown.push(name);
      continue;
    }
    if (value === undefined) {
      if (kind === 'bool') value = 'true';
      else if (i + 1 < argv.length) value = argv[++i];
      else throw new UsageError(`flag needs an argument: --${name}`);
    }
    if (kind === 'int' && !/^-?\d+$/.test(value)) throw new UsageError(`invalid argument "${value}" for "--${name}" flag: not an integer`);
    if (kind === 'bool' && !['true', 'false', '1', '0', 't', 'f', 'TRUE', 'FALSE', 'True', 'False'].includes(value)) {
      throw new UsageError(`invalid argument "${value}" for "--${name}" flag: not a boolean`);
    }
    values.set(name, value);
  }
  return { values, positional, unknown };
}

/** Istio's logging flags (shared by every istio binary), accepted on both commands. */
export const LOG_FLAGS: Record<string, FlagKind> = {
  log_as_json: 'bool', log_caller: 'string', log_output_level: 'string', log_rotate: 'string', log_rotate_max_age: 'int',
  log_rotate_max_backups: 'int', log_rotate_max_size: 'int', log_stacktrace_level: 'string', log_target: 'string', vklog: 'int',
};

const PROXY_FLAGS: Record<string, FlagKind> = {
  ...LOG_FLAGS, domain: 'string', meshConfig: 'string', stsPort: 'int', tokenManagerPlugin: 'string', serviceCluster: 'string',
  proxyLogLevel: 'string', concurrency: 'int', proxyComponentLogLevel: 'string', templateFile: 'string', outlierLogPath: 'string',
  profiling: 'bool', help: 'bool', h: 'bool',
};

export function parsePilotProxyArgs(argv: readonly string[]): PilotProxyArgs {
  const p = parseFlags(argv, PROXY_FLAGS);
  if (p.values.has('help') || p.values.has('h')) throw new UsageError('');
  if (p.positional.length > 1) throw new UsageError(`unexpected arguments: ${p.positional.slice(1).join(' ')}`);
  const v = (k: string, d: string): string => p.values.get(k) ?? d;
  const concurrency = Number(v('concurrency', '0'));
  if (concurrency < 0) throw new UsageError(`--concurrency: must not be negative, got ${concurrency}`);
  return {
    type: p.positional[0],
    domain: v('domain', ''),
    meshConfigFile: v('meshConfig', './etc/istio/config/mesh'),
    serviceCluster: v('serviceCluster', 'istio-proxy'),
    proxyLogLevel: v('proxyLogLevel', 'warning,misc:error'),
    proxyComponentLogLevel: v('proxyComponentLogLevel', ''),
    logOutputLevel: v('log_output_level', 'default:info'),
    concurrency,
    stsPort: Number(v('stsPort', '0')),
    templateFile: v('templateFile', ''),
    outlierLogPath: v('outlierLogPath', ''),
    logAsJson: ['true', '1', 't', 'TRUE', 'True'].includes(v('log_as_json', 'false')),
    unknownFlags: p.unknown,
  };
}

export function parsePilotWaitArgs(argv: readonly string[]): PilotWaitArgs {
  const p = parseFlags(argv, { ...LOG_FLAGS, timeoutSeconds: 'int', requestTimeoutMillis: 'int', periodMillis: 'int', url: 'string', help: 'bool', h: 'bool' });
  if (p.values.has('help') || p.values.has('h')) throw new UsageError('');
  return {
    timeoutSeconds: Number(p.values.get('timeoutSeconds') ?? 60),
    requestTimeoutMillis: Number(p.values.get('requestTimeoutMillis') ?? 500),
    periodMillis: Number(p.values.get('periodMillis') ?? 500),
    url: p.values.get('url') ?? 'http://localhost:15021/healthz/ready',
  };
}

/**
 * Envoy's level from `--proxyLogLevel` ("warning,misc:error" → "warning"): the entry without
 * a scope sets the level; scoped entries (`misc:error`) have no counterpart here.
 */
export function envoyLogLevel(proxyLogLevel: string): string {
  const global = proxyLogLevel.split(',').map((s) => s.trim()).find((s) => s && !s.includes(':'));
  return global ?? 'warning';
}

/**
 * The Envoy component levels pilot-agent hands on: the scoped entries of `--proxyLogLevel`
 * (`warning,misc:error` → `misc:error`) followed by `--proxyComponentLogLevel`.
 */
export function envoyComponentLogLevel(proxyLogLevel: string, proxyComponentLogLevel: string): string {
  const scoped = proxyLogLevel.split(',').map((s) => s.trim()).filter((s) => s.includes(':'));
  return [...scoped, ...proxyComponentLogLevel.split(',').map((s) => s.trim()).filter(Boolean)].join(',');
}

export const PILOT_USAGE = `usage: skua-proxy proxy [sidecar|router|waypoint] [flags]   (pilot-agent proxy)
       skua-proxy wait [flags]                                (pilot-agent wait)
       skua-proxy istio-iptables [flags] | istio-clean-iptables [flags]
       skua-proxy (-c <path> | --config-yaml <yaml>) [Envoy flags]`;

/** `skua-proxy proxy --help`: pilot-agent's proxy command. */
export const PILOT_PROXY_HELP = `usage: skua-proxy proxy [sidecar|router|waypoint] [flags]

Istio's pilot-agent and Envoy in one process, as istio-proxy runs them: the node identity from the
injector's environment (POD_NAME, POD_NAMESPACE, INSTANCE_IP, SERVICE_ACCOUNT, PROXY_CONFIG,
ISTIO_META_*, CA_ADDR, ...), a bootstrap written to ./etc/istio/proxy/envoy-rev.json, xDS from the
discovery address, workload certificates from CA_ADDR (token ./var/run/secrets/tokens/istio-token,
root ./var/run/secrets/istio/root-cert.pem), status on 15020/15021, Prometheus on 15090, DNS proxy on
15053 with ISTIO_META_DNS_CAPTURE=true. Relative paths are from the working directory (/ in the image).

  --domain D                    DNS domain suffix (default <POD_NAMESPACE>.svc.cluster.local)
  --serviceCluster C            service cluster (default istio-proxy)
  --concurrency N               worker threads (default: ProxyConfig.concurrency, else 2)
  --proxyLogLevel L             Envoy's level, with optional scoped entries (default warning,misc:error)
  --proxyComponentLogLevel C:L  per-component levels, e.g. misc:error,upstream:debug
  --log_as_json                 JSON log lines ({"level","time","scope","msg"})
  --log_output_level S:L        accepted (the agent's own scopes log at the proxy's level here)
  --meshConfig FILE             mesh config file (default ./etc/istio/config/mesh)
  --outlierLogPath P            outlier detection event log
  --templateFile, --stsPort, --tokenManagerPlugin, --profiling, --log_*  accepted
  -h, --help                    this text

Unknown flags are reported and ignored, as pilot-agent does.`;

/** `skua-proxy wait --help`. */
export const PILOT_WAIT_HELP = `usage: skua-proxy wait [flags]

Waits until the proxy is ready (pilot-agent wait): polls the readiness URL until it answers 200.

  --url URL                     readiness URL (default http://localhost:15021/healthz/ready)
  --timeoutSeconds S            give up after S seconds, exit 1 (default 60)
  --periodMillis MS             time between attempts (default 500)
  --requestTimeoutMillis MS     time limit of one attempt (default 500)
  -h, --help                    this text`;
