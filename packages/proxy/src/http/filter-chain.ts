import type { Exchange, Headers } from './exchange.ts';
import type { Route, VirtualHost } from './route-config.ts';
import type { RequestRecord } from './request-record.ts';
import type { FilterCallbacks, LiveHttpFilter } from '../filters/http/types.ts';
import { FILTER_DISABLED } from './per-filter-config.ts';

/** A live filter with the name its per-route config is keyed by. */
export interface NamedFilter {
  readonly name: string;
  readonly filter: LiveHttpFilter;
}

/** The route-config level (for route-config-wide typed_per_filter_config). */
interface RouteConfigLevel { readonly perFilter: ReadonlyMap<string, unknown> | undefined }

/**
 * One request's walk through the HCM's decoder filters, ending in `proceed`
 * (the router). Created only when the HCM has filters besides the router.
 */
export class FilterChainRun implements FilterCallbacks {
  readonly ex: Exchange;
  readonly rec: RequestRecord;
  readonly route: Route | undefined;
  readonly vhost: VirtualHost | undefined;
  private readonly filters: readonly NamedFilter[];
  private readonly table: RouteConfigLevel;
  private readonly proceed: () => void;
  private readonly localReply: (status: number, body: string | undefined, flag: string, details: string, headers?: Headers) => void;
  private readonly abandon: () => void;
  private index = 0;
  private ended = false;
  /** Set while a filter waits on a call (onCancel); cleared when the chain moves on. */
  private cancel: (() => void) | undefined;
  private watchingClose = false;

  constructor(ex: Exchange, rec: RequestRecord, route: Route | undefined, vhost: VirtualHost | undefined, filters: readonly NamedFilter[],
    table: RouteConfigLevel, proceed: () => void,
    localReply: (status: number, body: string | undefined, flag: string, details: string, headers?: Headers) => void,
    abandon: () => void) {
    this.ex = ex; this.rec = rec; this.route = route; this.vhost = vhost; this.filters = filters;
    this.table = table; this.proceed = proceed; this.localReply = localReply; this.abandon = abandon;
  }

  perRoute<T>(name: string): T | undefined {
    const v = this.route?.perFilter?.get(name) ?? this.vhost?.perFilter?.get(name) ?? this.table.perFilter?.get(name);
    return v === FILTER_DISABLED ? undefined : v as T | undefined;
  }

  perRouteAll<T>(name: string): readonly T[] {
    const out: T[] = [];
    for (const v of [this.table.perFilter?.get(name), this.vhost?.perFilter?.get(name), this.route?.perFilter?.get(name)]) {
      if (v !== undefined && v !== FILTER_DISABLED) out.push(v as T);
    }
    return out;
  }

  private disabled(name: string): boolean {
    return (this.route?.perFilter?.get(name) ?? this.vhost?.perFilter?.get(name) ?? this.table.perFilter?.get(name)) === FILTER_DISABLED;
  }

  continueDecoding(): void {
    this.cancel = undefined;
    while (this.index < this.filters.length) {
      if (this.ended) return;
      const f = this.filters[this.index++];
      if (this.disabled(f.name)) continue;
      if (f.filter.decodeHeaders(this) === 'stop') return;
    }
    if (!this.ended) { this.ended = true; this.proceed(); }
  }

  continueAfter(ms: number, wake: () => boolean, cancelled: () => void): void {
    let waiting = true;
    const timer = setTimeout(() => {
      waiting = false;
      if (wake()) this.continueDecoding();
    }, ms);
    this.ex.watch(noop, () => {
      if (!waiting) return;
      waiting = false;
      clearTimeout(timer);
      cancelled();
      this.ended = true;
      this.abandon();
    });
  }

  onCancel(cancelled: () => void): void {
    this.cancel = cancelled;
    if (this.watchingClose) return;
    this.watchingClose = true;
    this.ex.watch(noop, () => {
      const c = this.cancel;
      if (!c || this.ended) return;
      this.cancel = undefined;
      c();
      this.ended = true;
      this.abandon();
    });
  }

  sendLocalReply(status: number, body: string | undefined, flag: string, details: string, headers?: Headers): void {
    this.cancel = undefined;
    if (this.ended) return;
    this.ended = true;
    this.localReply(status, body, flag, details, headers);
  }

  /** Response headers pass the filters in reverse order. */
  encodeHeaders(status: number, headers: Headers): void {
    for (let i = this.filters.length - 1; i >= 0; i--) {
      const f = this.filters[i];
      if (f.filter.encodeHeaders && !this.disabled(f.name)) f.filter.encodeHeaders(this, status, headers);
    }
  }
}

function noop(): void { /* only the close matters while delayed */ }
