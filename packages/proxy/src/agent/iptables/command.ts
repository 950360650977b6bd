/**
 * `skua-proxy istio-iptables [flags]` (istio-init's job) and `skua-proxy istio-clean-iptables
 * [flags]`: parse the flags, plan the rules, then print them (`--dry-run`), apply them
 * idempotently, or remove them (`--cleanup-only` / istio-clean-iptables). Exit 1 on any error.
 */
import { UsageError } from '../cli.ts';
import { HostError, IPTABLES_USAGE, parseIptablesConfig, type IptablesConfig } from './config.ts';
import { planRules, type RulePlan } from './plan.ts';
import { restoreText } from './rules.ts';
import { applyPlan, cleanPlan, IptablesError, systemRunner, type Runner } from './apply.ts';

export interface IptablesIo {
  readonly env: Readonly<Record<string, string | undefined>>;
  readonly out: (s: string) => void;
  readonly err: (s: string) => void;
  /** Overrides for tests: the iptables runner and the inputs read from the host. */
  readonly runner?: Runner;
  readonly resolvConf?: string;
  readonly interfaces?: Parameters<typeof parseIptablesConfig>[0]['interfaces'];
}

/** The iptables-restore input `--dry-run` prints: IPv4, then IPv6 when enabled, each after a comment line. */
export function dryRunText(cfg: IptablesConfig, plan: RulePlan): string {
  let out = `# iptables-restore --noflush\n${restoreText(plan.v4)}`;
  if (cfg.enableIpv6) out += `# ip6tables-restore --noflush\n${restoreText(plan.v6)}`;
  return out;
}

function configFrom(argv: readonly string[], io: IptablesIo): IptablesConfig | number {
  try {
    return parseIptablesConfig({ argv, env: io.env, resolvConf: io.resolvConf, interfaces: io.interfaces });
  } catch (e) {
    if (e instanceof HostError) { io.err(`Error: ${e.message}\n`); return 1; }
    if (!(e instanceof UsageError)) throw e;
    if (!e.message) { io.out(`${IPTABLES_USAGE}\n`); return 0; }
    io.err(`Error: ${e.message}\n${IPTABLES_USAGE}\n`);
    return 1;
  }
}

export function runIstioIptables(argv: readonly string[], io: IptablesIo, cleanOnly = false): number {
  const cfg = configFrom(argv, io);
  if (typeof cfg === 'number') return cfg;
  const plan = planRules(cfg);
  const cleanup = cleanOnly || cfg.cleanupOnly;
  if (cfg.dryRun) {
    io.out(cleanup ? '# dry run: would remove the ISTIO_* chains and the rules jumping to them\n' : dryRunText(cfg, plan));
    return 0;
  }
  if (cfg.skipRuleApply) { io.out('skipping rule apply (--skip-rule-apply)\n'); return 0; }
  const run = io.runner ?? systemRunner(cfg.networkNamespace);
  try {
    if (cleanup) {
      cleanPlan(cfg, plan, run);
      io.out('istio iptables rules removed\n');
      return 0;
    }
    const r = applyPlan(cfg, plan, run);
    io.out(`IPv4: ${describe(r.v4, plan.v4.length)}${cfg.enableIpv6 ? `; IPv6: ${describe(r.v6, plan.v6.length)}` : ''}\n`);
    return 0;
  } catch (e) {
    if (!(e instanceof IptablesError)) throw e;
    io.err(`Error: ${e.message}\n`);
    return 1;
  }
}

function describe(outcome: string, count: number): string {
  switch (outcome) {
    case 'unchanged': return `${count} rules already in place`;
    case 'reconciled': return `earlier rules replaced by ${count} rules`;
    case 'cleaned': return 'earlier rules removed';
    default: return `${count} rules applied`;
  }
}
