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
  profiling: 'bool', help: 'bool',
};

export function parsePilotProxyArgs(argv: readonly string[]): PilotProxyArgs {
  const p = parseFlags(argv, PROXY_FLAGS);
  if (p.values.has('help')) throw new UsageError('');
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
    unknownFlags: p.unknown,
  };
}

export function parsePilotWaitArgs(argv: readonly string[]): PilotWaitArgs {
  const p = parseFlags(argv, { ...LOG_FLAGS, timeoutSeconds: 'int', requestTimeoutMillis: 'int', periodMillis: 'int', url: 'string', help: 'bool' });
  if (p.values.has('help')) throw new UsageError('');
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

export const PILOT_USAGE = `usage: skua-proxy proxy [sidecar|router|waypoint] [--domain D] [--serviceCluster C] [--concurrency N]
                        [--proxyLogLevel L] [--proxyComponentLogLevel L] [--meshConfig FILE] [--outlierLogPath P]
       skua-proxy wait [--url URL] [--timeoutSeconds S] [--periodMillis MS] [--requestTimeoutMillis MS]
       skua-proxy istio-iptables [istio-iptables flags] | istio-clean-iptables [flags]
       skua-proxy (-c <path> | --config-yaml <yaml>) [Envoy flags]`;
