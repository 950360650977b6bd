import { parseArgs } from 'node:util';

/** Envoy's command line, the subset a data plane needs (same names, same defaults). */
export interface ProxyArgs {
  readonly configPath: string;
  readonly configYaml: string;
  readonly mode: 'serve' | 'validate' | 'init_only';
  readonly concurrency: number;
  readonly logLevel: string;
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
        'log-format': { type: 'string' },
        'component-log-level': { type: 'string' },
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
    drainTimeS,
    drainStrategy,
    allowUnknownStaticFields: Boolean(values['allow-unknown-static-fields'] || values['allow-unknown-fields']),
    // As in Envoy, rejecting wins over ignoring when both are given.
    unknownDynamicFields: values['reject-unknown-dynamic-fields'] ? 'reject' : values['ignore-unknown-dynamic-fields'] ? 'ignore' : 'warn',
  };
}

export const USAGE = `usage: skua-proxy (-c <path> | --config-yaml <yaml>) [--mode serve|validate|init_only]
                  [--concurrency N] [-l trace|debug|info|warning|error|critical|off] [--drain-time-s S]
                  [--drain-strategy gradual|immediate]
                  [--allow-unknown-static-fields] [--reject-unknown-dynamic-fields] [--ignore-unknown-dynamic-fields]`;
