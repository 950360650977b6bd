/**
 * Putting a rule plan into the kernel, idempotently: read the current state with
 * iptables-save, and then
 *  - nothing of ours there: apply the plan in one iptables-restore --noflush (atomic per table);
 *  - exactly the plan there (same ISTIO_* chains, same rule counts, every rule passes `-C`): done;
 *  - something else of ours there: with --reconcile remove it and apply, else refuse, naming the drift.
 * Clean-up deletes the planned rules and then anything still pointing at or named ISTIO_*.
 */
import { spawnSync } from 'node:child_process';
import type { IptablesConfig } from './config.ts';
import { checkCommands, chainsOf, cleanupCommands, isBuiltIn, restoreText, type Rule } from './rules.ts';
import type { RulePlan } from './plan.ts';

export interface RunResult {
  readonly code: number;
  readonly stdout: string;
  readonly stderr: string;
}

/** Runs one iptables binary (tests substitute a recorder). */
export type Runner = (bin: string, args: readonly string[], input?: string) => RunResult;

export function systemRunner(networkNamespace: string): Runner {
  return (bin, args, input) => {
    const [cmd, argv] = networkNamespace ? ['nsenter', [`--net=${networkNamespace}`, '--', bin, ...args]] : [bin, [...args]];
    const r = spawnSync(cmd, argv, { input, encoding: 'utf8', timeout: 60_000 });
    if (r.error) return { code: 127, stdout: '', stderr: `${cmd}: ${r.error.message}` };
    return { code: r.status ?? 1, stdout: r.stdout ?? '', stderr: r.stderr ?? '' };
  };
}

export interface Binaries {
  readonly iptables: string;
  readonly save: string;
  readonly restore: string;
}

export function binariesFor(cfg: IptablesConfig, v6: boolean): Binaries {
  const base = (v6 ? 'ip6tables' : 'iptables') + (cfg.iptablesBinary === '' ? '' : cfg.iptablesBinary.slice('iptables'.length));
  return { iptables: base, save: `${base}-save`, restore: `${base}-restore` };
}

/** What iptables-save shows of ours: ISTIO_* chains with their rule counts, and built-in chains' jumps into them. */
export interface IstioState {
  readonly chains: Map<string, number>;
  readonly jumps: Map<string, number>;
}

export function istioState(saveOutput: string): IstioState {
  const chains = new Map<string, number>();
  const jumps = new Map<string, number>();
  let table = '';
  for (const line of saveOutput.split('\n')) {
    if (line.startsWith('*')) { table = line.slice(1).trim(); continue; }
    const decl = /^:(ISTIO_\S+)/.exec(line);
    if (decl) { chains.set(`${table}:${decl[1]}`, chains.get(`${table}:${decl[1]}`) ?? 0); continue; }
    const rule = /^-A (\S+) .*-j (\S+)/.exec(line) ?? /^-A (\S+)/.exec(line);
    if (!rule) continue;
    const chain = rule[1];
    if (chain.startsWith('ISTIO_')) chains.set(`${table}:${chain}`, (chains.get(`${table}:${chain}`) ?? 0) + 1);
    else if (rule[2]?.startsWith('ISTIO_')) jumps.set(`${table}:${chain}>${rule[2]}`, (jumps.get(`${table}:${chain}>${rule[2]}`) ?? 0) + 1);
  }
  return { chains, jumps };
}

/** The state a plan produces, in the same shape. */
export function plannedState(rules: readonly Rule[]): IstioState {
  const chains = new Map<string, number>();
  const jumps = new Map<string, number>();
  for (const [table, list] of chainsOf(rules)) for (const c of list) if (c.startsWith('ISTIO_')) chains.set(`${table}:${c}`, 0);
  for (const r of rules) {
    const target = r.params[r.params.length - 2] === '-j' ? r.params[r.params.length - 1] : '';
    if (r.chain.startsWith('ISTIO_')) chains.set(`${r.table}:${r.chain}`, (chains.get(`${r.table}:${r.chain}`) ?? 0) + 1);
    else if (target.startsWith('ISTIO_')) jumps.set(`${r.table}:${r.chain}>${target}`, (jumps.get(`${r.table}:${r.chain}>${target}`) ?? 0) + 1);
  }
  return { chains, jumps };
}

/** How the current state differs from the planned one ('' when they match). */
export function stateDrift(current: IstioState, planned: IstioState): string {
  for (const m of ['chains', 'jumps'] as const) {
    for (const [k, n] of planned[m]) {
      const have = current[m].get(k);
      if (have === undefined) return `${m === 'chains' ? 'chain' : 'jump'} ${k} is missing`;
      if (have !== n) return `${k} has ${have} rules, the plan has ${n}`;
    }
    for (const k of current[m].keys()) if (!planned[m].has(k)) return `${m === 'chains' ? 'chain' : 'jump'} ${k} is not in the plan`;
  }
  return '';
}

const hasResidue = (s: IstioState): boolean => s.chains.size > 0 || s.jumps.size > 0;

export class IptablesError extends Error {}

function must(r: RunResult, what: string): RunResult {
  if (r.code !== 0) throw new IptablesError(`${what} failed (exit ${r.code}): ${r.stderr.trim() || r.stdout.trim()}`);
  return r;
}

export type FamilyOutcome = 'applied' | 'unchanged' | 'reconciled' | 'cleaned' | 'skipped';

/** Applies one family's rules (see the header); returns what happened. */
export function applyFamily(rules: readonly Rule[], bins: Binaries, run: Runner, opts: { reconcile: boolean; forceApply: boolean }): FamilyOutcome {
  const save = run(bins.save, []);
  const current = save.code === 0 ? istioState(save.stdout) : { chains: new Map(), jumps: new Map() };
  const planned = plannedState(rules);
  let outcome: FamilyOutcome = 'applied';
  if (hasResidue(current)) {
    let drift = stateDrift(current, planned);
    if (drift === '') {
      const failing = checkCommands(rules).find((args) => run(bins.iptables, ['-w', ...args]).code !== 0);
      if (failing) drift = `rule not in place: ${failing.join(' ')}`;
    }
    if (drift === '' && !opts.forceApply) return 'unchanged';
    if (drift !== '' && !opts.reconcile && !opts.forceApply) {
      throw new IptablesError(`rules from an earlier run differ from this configuration (${drift}); rerun with --reconcile to replace them, or run istio-clean-iptables first`);
    }
    if (opts.reconcile) { cleanFamily(rules, bins, run, save.stdout); outcome = 'reconciled'; }
  }
  if (rules.length === 0) return outcome === 'reconciled' ? 'cleaned' : 'unchanged';
  must(run(bins.restore, ['--noflush'], restoreText(rules)), `${bins.restore} --noflush`);
  return outcome;
}

/** Removes one family's rules: the planned ones, then whatever ISTIO_* chains and jumps remain. */
export function cleanFamily(rules: readonly Rule[], bins: Binaries, run: Runner, saved?: string): void {
  for (const args of cleanupCommands(rules)) run(bins.iptables, ['-w', ...args]);
  const text = run(bins.save, []).stdout || saved || '';
  const chains: Array<[string, string]> = [];
  let table = '';
  for (const line of text.split('\n')) {
    if (line.startsWith('*')) { table = line.slice(1).trim(); continue; }
    const decl = /^:(ISTIO_\S+)/.exec(line);
    if (decl) { chains.push([table, decl[1]]); continue; }
    const jump = /^-A (\S+) (.*-j ISTIO_\S+.*)$/.exec(line);
    if (jump && isBuiltIn(jump[1])) run(bins.iptables, ['-w', '-t', table, '-D', jump[1], ...splitSaveArgs(jump[2])]);
  }
  for (const [t, c] of chains) run(bins.iptables, ['-w', '-t', t, '-F', c]);
  for (const [t, c] of chains) run(bins.iptables, ['-w', '-t', t, '-X', c]);
}

/** iptables-save quotes arguments with spaces ("--comment \"a b\""): split like a shell would. */
export function splitSaveArgs(s: string): string[] {
  const out: string[] = [];
  const re = /"((?:[^"\\]|\\.)*)"|(\S+)/g;
  for (const m of s.matchAll(re)) out.push(m[1] !== undefined ? m[1].replace(/\\(.)/g, '$1') : m[2]);
  return out;
}

export interface ApplyReport {
  readonly v4: FamilyOutcome;
  readonly v6: FamilyOutcome;
}

export function applyPlan(cfg: IptablesConfig, plan: RulePlan, run: Runner): ApplyReport {
  const opts = { reconcile: cfg.reconcile, forceApply: cfg.forceApply };
  const v4 = applyFamily(plan.v4, binariesFor(cfg, false), run, opts);
  const v6 = cfg.enableIpv6 ? applyFamily(plan.v6, binariesFor(cfg, true), run, opts) : 'skipped';
  return { v4, v6 };
}

export function cleanPlan(cfg: IptablesConfig, plan: RulePlan, run: Runner): void {
  cleanFamily(plan.v4, binariesFor(cfg, false), run);
  // IPv6 residue is removed even when this pod has no IPv6 address now (ip6tables may be absent: ignored).
  cleanFamily(plan.v6, binariesFor(cfg, true), run);
}
