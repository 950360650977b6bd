/**
 * Route configurations delivered by RDS, shared by name. Each HTTP connection manager
 * that names one attaches with its own per-filter compilers and gets a RouteTable
 * compiled for it; an update compiles for every user first and swaps only if all
 * succeed, so a bad RouteConfiguration is refused whole and the old tables keep serving.
 * In-flight requests keep the table they started with.
 */
import { Msg } from '../config/fields.ts';
import { RouteTable } from './route-config.ts';
import type { PerFilterCompilers } from './per-filter-config.ts';

export interface RdsUser {
  readonly compilers: PerFilterCompilers;
  onTable(table: RouteTable): void;
}

/** A route config with no virtual hosts: every request gets 404 NR (RDS not yet delivered or removed). */
export const EMPTY_ROUTES = new RouteTable(new Msg({}, 'route_config'));

/**
 * An accepted RouteConfiguration as the config layer keeps it: its bytes when it came over ADS, decoded
 * again on read (xds/state.ts track()). Its JSON tree was ~1.1 KB per virtual host, kept beside the
 * compiled tables for config_dump and for listeners that attach later.
 */
export interface RouteSource {
  readonly json: Record<string, unknown>;
}

export class RdsRoute {
  readonly name: string;
  /** The accepted RouteConfiguration (undefined until the first one arrives, or after removal). */
  private accepted: RouteSource | undefined;
  /**
   * Its table, when it has no typed_per_filter_config: the same for every connection manager, so it
   * is compiled once for all of them (a mesh's one for 5,000 virtual hosts took ~100 ms each time).
   */
  private plain: RouteTable | undefined;
  version = '';
  lastUpdated = 0;
  private readonly users = new Set<RdsUser>();

  constructor(name: string) {
    this.name = name;
  }

  get ready(): boolean {
    return this.accepted !== undefined;
  }

  get source(): Record<string, unknown> | undefined {
    return this.accepted?.json;
  }

  private get msg(): Msg | undefined {
    return this.accepted && new Msg(this.accepted.json, `route_configuration[${this.name}]`);
  }

  /** HCM stat_prefixes naming this route config (recorded when an HCM config compiles). */
  private readonly statPrefixes = new Set<string>();

  /** An HCM config with this stat_prefix follows this route config. */
  noteStatPrefix(prefix: string): void {
    this.statPrefixes.add(prefix);
  }

  /** RDS stat scopes, as Envoy names them: `http.<stat_prefix>.rds.<route_config_name>.` per HCM prefix. */
  statScopes(): string[] {
    return [...this.statPrefixes].map((p) => `http.${p}.rds.${this.name}.`);
  }

  get inUse(): boolean {
    return this.users.size > 0;
  }

  /**
   * Compiles `raw` for every user; throws a ConfigError (nothing changed) if any compile fails.
   * `source` gives the same config again later (config_dump, a listener attaching).
   */
  update(raw: Record<string, unknown>, version: string, source: RouteSource = { json: raw }): void {
    const msg = new Msg(raw, `route_configuration[${this.name}]`);
    const tables = new Map<RdsUser, RouteTable>();
    let plain: RouteTable | undefined;
    const compile = (compilers: PerFilterCompilers | undefined): RouteTable => {
      if (plain) return plain;
      const t = new RouteTable(msg, compilers);
      if (!t.hasPerFilterConfig) plain = t;
      return t;
    };
    // With no user yet, compiled to check it (and kept, if any user may share it: they attach next).
    if (this.users.size === 0) compile(undefined);
    for (const u of this.users) tables.set(u, compile(u.compilers));
    this.accepted = source;
    this.plain = plain;
    this.version = version;
    this.lastUpdated = Date.now();
    for (const [u, t] of tables) u.onTable(t);
  }

  remove(): void {
    this.accepted = undefined;
    this.plain = undefined;
    for (const u of this.users) u.onTable(EMPTY_ROUTES);
  }

  /** A connection manager starts using this route config: its table now (empty until delivered). */
  attach(user: RdsUser): RouteTable {
    this.users.add(user);
    if (this.plain) return this.plain;
    const msg = this.msg;
    return msg ? new RouteTable(msg, user.compilers) : EMPTY_ROUTES;
  }

  detach(user: RdsUser): void {
    this.users.delete(user);
  }
}

const byName = new Map<string, RdsRoute>();

/** The shared RDS route config by name (created on first reference). */
export function rdsRoute(name: string): RdsRoute {
  let r = byName.get(name);
  if (!r) { r = new RdsRoute(name); byName.set(name, r); }
  return r;
}

export function allRdsRoutes(): IterableIterator<RdsRoute> {
  return byName.values();
}
