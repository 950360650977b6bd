import { parseArgs } from 'node:util';
import { ISTIO_JSON_LOG_FORMAT } from '../core/log-format.ts';

/** Envoy's command line, the subset a data plane needs (same names, same defaults). */
export interface ProxyArgs {
  readonly configPath: string;
  readonly configYaml: string;
  readonly mode: 'serve' | 'validate' | 'init_only';
  readonly concurrency: number;
  readonly logLevel: string;
  /** --component-log-level `upstream:debug,connection:trace` ('' = none). */
  readonly componentLogLevel?: string;
  /** --log-format (an spdlog pattern; '' = the default) and --log-format-escaped. */
  readonly logFormat?: string;
  readonly logFormatEscaped?: boolean;
  readonly drainTimeS: number;
  /** --drain-strategy: gradual (Envoy's default) or immediate. */
  readonly drainStrategy: 'gradual' | 'immediate';
  /** Unknown fields in the bootstrap: rejected unless --allow-unknown-static-fields (then logged and counted). */
  readonly allowUnknownStaticFields?: boolean;
  /** Unknown protobuf fields in xDS resources: counted and logged (Envoy's default), rejected, or ignored. */
  readonly unknownDynamicFields?: 'warn' | 'reject' | 'ignore';
}

export class UsageError extends Error {}

export function parseProxyArgs(argv: readonly string[]): ProxyArgs {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      options: {
        'config-path': { type: 'string', short: 'c' },
        'config-yaml': { type: 'string' },
        mode: { type: 'string', default: 'serve' },
        concurrency: { type: 'string' },
        'log-level': { type: 'string', short: 'l', default: 'info' },
        'drain-time-s': { type: 'string', default: '600' },
        'drain-strategy': { type: 'string', default: 'gradual' },
        // Accepted for compatibility with istio-proxy's and Envoy's launch lines; they change nothing here.
        'parent-shutdown-time-s': { type: 'string' },
        'service-cluster': { type: 'string' },
        'service-node': { type: 'string' },
        'base-id': { type: 'string' },
        'component-log-level': { type: 'string' },
        'log-format': { type: 'string' },
        'log-format-escaped': { type: 'boolean' },
        // Istio's switch (pilot-agent, istiod): JSON lines, as --log-format with ISTIO_JSON_LOG_FORMAT.
        log_as_json: { type: 'boolean' },
        'log-as-json': { type: 'boolean' },
        'local-address-ip-version': { type: 'string' },
        'disable-hot-restart': { type: 'boolean' },
        'allow-unknown-static-fields': { type: 'boolean' },
        'allow-unknown-fields': { type: 'boolean' }, // Envoy's deprecated spelling of the above
        'reject-unknown-dynamic-fields': { type: 'boolean' },
        'ignore-unknown-dynamic-fields': { type: 'boolean' },
        'file-flush-interval-msec': { type: 'string' },
        'use-dynamic-base-id': { type: 'boolean' },
        help: { type: 'boolean', short: 'h' },
        version: { type: 'boolean' },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  if (values.help) throw new UsageError('');
  const mode = values.mode;
  if (mode !== 'serve' && mode !== 'validate' && mode !== 'init_only') throw new UsageError(`--mode: expected serve, validate or init_only, got ${mode}`);
  const concurrency = values.concurrency === undefined ? 1 : Number(values.concurrency);
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new UsageError(`--concurrency: expected a positive integer, got ${values.concurrency}`);
  const drainTimeS = Number(values['drain-time-s']);
  if (!Number.isFinite(drainTimeS) || drainTimeS < 0) throw new UsageError(`--drain-time-s: expected seconds, got ${values['drain-time-s']}`);
  const drainStrategy = values['drain-strategy'];
  if (drainStrategy !== 'gradual' && drainStrategy !== 'immediate') throw new UsageError(`--drain-strategy: expected gradual or immediate, got ${drainStrategy}`);
  return {
    configPath: values['config-path'] ?? '',
    configYaml: values['config-yaml'] ?? '',
    mode,
    concurrency,
    logLevel: values['log-level'] ?? 'info',
    componentLogLevel: values['component-log-level'] ?? '',
    logFormat: values.log_as_json || values['log-as-json'] ? ISTIO_JSON_LOG_FORMAT : values['log-format'] ?? '',
    logFormatEscaped: Boolean(values['log-format-escaped']),
    drainTimeS,
    drainStrategy,
    allowUnknownStaticFields: Boolean(values['allow-unknown-static-fields'] || values['allow-unknown-fields']),
    // As in Envoy, rejecting wins over ignoring when both are given.
    unknownDynamicFields: values['reject-unknown-dynamic-fields'] ? 'reject' : values['ignore-unknown-dynamic-fields'] ? 'ignore' : 'warn',
  };
}

export const USAGE = `usage: skua-proxy (-c <path> | --config-yaml <yaml>) [options]
       skua-proxy proxy sidecar|router|waypoint [pilot-agent flags]   (skua-proxy proxy --help)
       skua-proxy wait [flags]                                         (skua-proxy wait --help)
       skua-proxy istio-iptables [flags] | istio-clean-iptables [flags] (... --help)`;

/** --help: Envoy's flags, as Envoy names them. */
export const HELP = `${USAGE}

Runs Envoy's bootstrap (YAML or JSON, static or xDS) with Envoy's command line.

  -c, --config-path FILE            the bootstrap file (.json = JSON, else YAML)
      --config-yaml YAML            a bootstrap as a string, merged over -c
      --mode serve|validate|init_only
                                    run (default); check the config and exit; initialise and exit
      --concurrency N               worker threads sharing each listener port (default 1)
  -l, --log-level LEVEL             trace, debug, info (default), warning, error, critical, off
      --component-log-level C:L,... per component, e.g. upstream:debug,http:trace,connection:debug
                                    (Envoy's names: admin, config, connection, dns, filter, http, jwt,
                                    main, pool, rbac, router, secret, upstream, ...)
      --log-format PATTERN          spdlog pattern (default '[%Y-%m-%d %T.%e][%t][%l][%n] %v'); %j is
                                    the JSON-escaped message, for JSON lines
      --log-format-escaped          escape control characters in messages
      --log_as_json                 JSON lines: {"level","time","scope","msg"} (Istio's format)
      --drain-time-s S              drain time for SIGTERM and /drain_listeners?graceful (default 600)
      --drain-strategy gradual|immediate
      --allow-unknown-static-fields log unknown bootstrap fields instead of refusing them
      --reject-unknown-dynamic-fields | --ignore-unknown-dynamic-fields
                                    unknown fields in xDS resources: NACK | ignore (default: count, log)
      --version                     print the version
  -h, --help                        this text

Accepted and ignored (istio-proxy's and Envoy's launch lines): --parent-shutdown-time-s, --service-cluster,
--service-node, --base-id, --use-dynamic-base-id, --local-address-ip-version, --disable-hot-restart,
--file-flush-interval-msec.
Logs go to stderr. Config errors exit 1 with "error initializing configuration '<file>': <field>: <reason>".`;
