/**
 * A planned rule set for one IP family and what is derived from it: the iptables-restore
 * input (`--noflush`, chains created first), the `-C` checks that tell whether the rules
 * are in place, and the commands that undo them.
 */

export type Table = 'filter' | 'mangle' | 'nat' | 'raw';

export interface Rule {
  readonly table: Table;
  readonly chain: string;
  /** `-A CHAIN ...` or `-I CHAIN POS ...`. */
  readonly params: readonly string[];
}

const BUILT_IN = new Set(['INPUT', 'OUTPUT', 'FORWARD', 'PREROUTING', 'POSTROUTING', 'ACCEPT', 'RETURN', 'DROP']);

export function isBuiltIn(chain: string): boolean {
  return BUILT_IN.has(chain);
}

/** Stand-in for an address that differs by family (the loopback CIDR, the 127.0.0.6 source). */
export const PER_FAMILY = '\0per-family';

/** Collects rules for both families; IPv6 rules only when IPv6 is enabled. */
export class RuleBuilder {
  readonly v4: Rule[] = [];
  readonly v6: Rule[] = [];
  private readonly ipv6: boolean;

  constructor(ipv6: boolean) {
    this.ipv6 = ipv6;
  }

  append(table: Table, chain: string, ...params: string[]): void {
    this.appendV4(table, chain, ...params);
    this.appendV6(table, chain, ...params);
  }

  appendV4(table: Table, chain: string, ...params: string[]): void {
    this.v4.push({ table, chain, params: ['-A', chain, ...params] });
  }

  appendV6(table: Table, chain: string, ...params: string[]): void {
    if (this.ipv6) this.v6.push({ table, chain, params: ['-A', chain, ...params] });
  }

  insert(table: Table, chain: string, position: number, ...params: string[]): void {
    this.insertV4(table, chain, position, ...params);
    this.insertV6(table, chain, position, ...params);
  }

  insertV4(table: Table, chain: string, position: number, ...params: string[]): void {
    this.v4.push({ table, chain, params: ['-I', chain, String(position), ...params] });
  }

  insertV6(table: Table, chain: string, position: number, ...params: string[]): void {
    if (this.ipv6) this.v6.push({ table, chain, params: ['-I', chain, String(position), ...params] });
  }

  /** One rule per family, with PER_FAMILY replaced by that family's value. */
  appendPerFamily(v4: string, v6: string, table: Table, chain: string, ...params: string[]): void {
    this.appendV4(table, chain, ...params.map((p) => (p === PER_FAMILY ? v4 : p)));
    this.appendV6(table, chain, ...params.map((p) => (p === PER_FAMILY ? v6 : p)));
  }
}

/** The jump target of a rule (`-j X`), if it is the rule's last option pair. */
function jumpTarget(params: readonly string[]): string | undefined {
  return params.length >= 2 && params[params.length - 2] === '-j' ? params[params.length - 1] : undefined;
}

/** Custom chains per table in the order they are first used (as a rule's chain, then as a jump target). */
export function chainsOf(rules: readonly Rule[]): Map<Table, string[]> {
  const out = new Map<Table, string[]>();
  const seen = new Set<string>();
  const add = (table: Table, chain: string): void => {
    const key = `${table}:${chain}`;
    if (seen.has(key) || isBuiltIn(chain)) return;
    seen.add(key);
    let list = out.get(table);
    if (!list) { list = []; out.set(table, list); }
    list.push(chain);
  };
  for (const r of rules) add(r.table, r.chain);
  for (const r of rules) {
    const target = jumpTarget(r.params);
    if (target !== undefined) add(r.table, target);
  }
  return out;
}

/** iptables-restore input for `--noflush`: per table (alphabetical), `-N` for each chain, then the rules. */
export function restoreText(rules: readonly Rule[]): string {
  const chains = chainsOf(rules);
  const lines = new Map<Table, string[]>();
  for (const [table, list] of chains) lines.set(table, list.map((c) => `-N ${c}`));
  for (const r of rules) {
    let l = lines.get(r.table);
    if (!l) { l = []; lines.set(r.table, l); }
    l.push(r.params.join(' '));
  }
  let out = '';
  for (const table of [...lines.keys()].sort()) {
    const l = lines.get(table)!;
    if (l.length === 0) continue;
    out += `* ${table}\n${l.join('\n')}\nCOMMIT\n`;
  }
  return out;
}

/** `iptables -t T -C CHAIN ...` argument lists, one per rule (an insert's position dropped). */
export function checkCommands(rules: readonly Rule[]): string[][] {
  return rules.map((r) => {
    const rest = r.params[0] === '-I' ? r.params.slice(3) : r.params.slice(2);
    return ['-t', r.table, '-C', r.chain, ...rest];
  });
}

/** Undo in reverse order: delete each rule, then flush and delete each custom chain. */
export function cleanupCommands(rules: readonly Rule[]): string[][] {
  const out: string[][] = [];
  for (let i = rules.length - 1; i >= 0; i--) {
    const r = rules[i];
    const rest = r.params[0] === '-I' ? r.params.slice(3) : r.params.slice(2);
    out.push(['-t', r.table, '-D', r.chain, ...rest]);
  }
  const chains = chainsOf(rules);
  for (const [table, list] of chains) for (const c of list) out.push(['-t', table, '-F', c]);
  for (const [table, list] of chains) for (const c of list) out.push(['-t', table, '-X', c]);
  return out;
}
