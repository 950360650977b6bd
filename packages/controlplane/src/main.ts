/**
 * skua-controlplane: serves xDS (SotW and Delta ADS) and WDS (Delta) from Istio YAML (`--istio DIR`),
 * a directory of resource files and/or a compact mesh description, pushing what changed when the
 * files change, and optionally the CA (istiod's IstioCertificateService, TLS) for workload certificates.
 * Subcommands: validate, apply/delete, token, compose-kube (see cli-help.ts, or --help).
 */
import { existsSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { applyLogFlags, explainError, ISTIO_JSON_LOG_FORMAT, logger } from '@skua/proxy/core';
import { APPLY_HELP, CONTROLPLANE_LOG_FORMAT, HELP, TOKEN_HELP, USAGE } from './cli-help.ts';

const log = logger('main');
// grpc-js would print its own copy of a bind failure; the error reaches the user once, explained.
process.env.GRPC_VERBOSITY ??= 'NONE';

function fail(message: string, hint = '(skua-controlplane --help lists every flag)'): number {
  process.stderr.write(`skua-controlplane: ${message}\n${hint ? `${hint}\n` : ''}`);
  return 2;
}

async function subcommand(name: string, argv: string[]): Promise<number | undefined> {
  const help = argv.includes('--help') || argv.includes('-h');
  switch (name) {
    case 'token': {
      if (help) { process.stdout.write(`${TOKEN_HELP}\n`); return 0; }
      const { runCaCli } = await import('./ca/cli.ts');
      return runCaCli(['token', ...argv]);
    }
    case 'validate': {
      const { runValidate, VALIDATE_USAGE } = await import('./istio/validate-cli.ts');
      if (help) { process.stdout.write(`${VALIDATE_USAGE}\n\nChecks Istio YAML without serving (Istio's schema and webhook rules, then istioctl analyze's\nreference checks): one line per problem, exit 0 when there is no error, 1 otherwise.\n  --errors-only   leave out warnings\n`); return 0; }
      return runValidate(argv);
    }
    case 'apply':
    case 'delete': {
      if (help) { process.stdout.write(`${APPLY_HELP}\n`); return 0; }
      const { runApply } = await import('./istio/apply.ts');
      return runApply(name, argv);
    }
    case 'compose-kube': {
      const { runComposeKube } = await import('./compose/kube-standin.ts');
      return runComposeKube(argv);
    }
    case 'help': process.stdout.write(`${HELP}\n`); return 0;
  }
  return undefined;
}

function dirArg(flag: string, dir: string | undefined): string | undefined {
  if (dir === undefined) return undefined;
  const st = statSync(dir, { throwIfNoEntry: false });
  if (!st) return `${flag} ${dir}: no such directory; create it or check the path`;
  if (!st.isDirectory()) return `${flag} ${dir}: not a directory`;
  return undefined;
}

async function serve(argv: string[]): Promise<number> {
  let values;
  try {
    ({ values } = parseArgs({
      args: argv, strict: true,
      options: {
        'config-dir': { type: 'string' }, mesh: { type: 'string' }, istio: { type: 'string' },
        'xds-address': { type: 'string', default: '127.0.0.1:15010' }, 'ca-address': { type: 'string' },
        'state-dir': { type: 'string' }, cacerts: { type: 'string' }, 'trust-domain': { type: 'string', default: 'cluster.local' },
        // istiod's CA_TRUSTED_NODE_ACCOUNTS: who may ask for other workloads' certificates (ztunnel).
        'ca-trusted-node-accounts': { type: 'string', default: 'istio-system/ztunnel' },
        'log-level': { type: 'string', short: 'l', default: 'info' }, 'log-format': { type: 'string' },
        log_as_json: { type: 'boolean' }, 'log-as-json': { type: 'boolean' }, help: { type: 'boolean', short: 'h' },
      },
    }));
  } catch (err) {
    return fail((err as Error).message);
  }
  if (values.help) { process.stdout.write(`${HELP}\n`); return 0; }
  const logError = applyLogFlags({ logLevel: values['log-level']!, logFormat: values.log_as_json || values['log-as-json'] ? ISTIO_JSON_LOG_FORMAT : values['log-format'] ?? CONTROLPLANE_LOG_FORMAT });
  if (logError) return fail(logError);
  const dir = values['config-dir'];
  const meshFile = values.mesh;
  const istioDir = values.istio;
  if (!dir && !meshFile && !istioDir && !values['ca-address']) return fail('nothing to serve: give --istio DIR, --config-dir DIR, --mesh FILE or --ca-address HOST:PORT', USAGE);
  const bad = dirArg('--istio', istioDir) ?? dirArg('--config-dir', dir) ?? dirArg('--cacerts', values.cacerts)
    ?? (meshFile && !existsSync(meshFile) ? `--mesh ${meshFile}: no such file; check the path` : undefined);
  if (bad) return fail(bad, '');
  const { startServing } = await import('./serve.ts');
  try {
    await startServing({
      dir, meshFile, istioDir, xdsAddress: values['xds-address']!, caAddress: values['ca-address'],
      stateDir: values['state-dir'], cacerts: values.cacerts, trustDomain: values['trust-domain']!,
      trustedNodeAccounts: values['ca-trusted-node-accounts']!.split(',').filter(Boolean),
    });
  } catch (err) {
    process.stderr.write(`skua-controlplane: ${explainError(err)}\n`);
    if (log.debugOn) process.stderr.write(`${(err as Error).stack}\n`);
    return 1;
  }
  return -1;
}

async function main(argv: string[]): Promise<number> {
  if (argv[0] && !argv[0].startsWith('-')) {
    const code = await subcommand(argv[0], argv.slice(1));
    if (code !== undefined) return code;
    return fail(`unknown command "${argv[0]}"`, USAGE);
  }
  return serve(argv);
}

main(process.argv.slice(2)).then((code) => { if (code >= 0) process.exit(code); }, (err: Error) => {
  process.stderr.write(`skua-controlplane: ${explainError(err)}\n`);
  if (log.debugOn) process.stderr.write(`${err?.stack ?? ''}\n`);
  process.exit(1);
});
