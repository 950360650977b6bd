/** Shared shapes for the benchmark harness (bench/run.ts). */
import type { SkuaBuild } from './builds.ts';

export type Scenario = 'idle' | 'l7' | 'l4' | 'micro' | 'routes' | 'xds' | 'xds-scale' | 'mtls' | 'sidecar-pair';
export type TargetName = 'direct' | 'nginx' | 'haproxy' | 'node-relay' | 'skua';

/** In the order a full run (`./dev bench`, `--only all`) takes them: quick ones first. */
export const ALL_SCENARIOS: readonly Scenario[] = ['idle', 'l7', 'l4', 'mtls', 'sidecar-pair', 'routes', 'xds', 'micro', 'xds-scale'];
export const ALL_TARGETS: readonly TargetName[] = ['direct', 'nginx', 'haproxy', 'node-relay', 'skua'];

export interface Options {
  /** Seconds of measured wrk load per L7 target. */
  duration: number;
  /** Seconds of unmeasured wrk load before each L7 measurement. */
  warmup: number;
  /** wrk connections (-c). */
  connections: number;
  /** wrk threads (-t). */
  threads: number;
  only: Scenario[];
  targets: TargetName[];
  /** Bytes pushed through each proxy per L4 run. */
  l4Bytes: number;
  /** Measured L4 runs per target (median is reported), after one warm-up run. */
  l4Runs: number;
  /** skua-proxy entry script (the shipped bin by default), relative to the repository root. */
  skuaMain: string;
  /** Git refs whose skua builds are compared side by side (--ref); empty: the working tree's skuaMain. */
  refs: string[];
  /** The builds measured (one unless --ref names several); filled once the run's temp dir exists. */
  builds: SkuaBuild[];
  /** EDS clusters pushed by the xds-scale scenario. */
  xdsClusters: number;
  /** xds-scale: a git ref whose build runs side by side with the working tree's (before / after). */
  skuaBefore: string | undefined;
  /** Exit 1 when an acceptance check fails. */
  strict: boolean;
}

/** One column of a result table; `better` says which direction wins. */
export interface Column {
  key: string;
  title: string;
  digits: number;
  better: 'higher' | 'lower';
}

/** One target's outcome in one scenario; `error` set means no metrics. */
export interface Row {
  target: TargetName;
  /** Tells apart rows of one target (sidecar-pair: skua-h1 / skua-h2; mtls: plain / mtls). */
  key?: string;
  label: string;
  metrics: Record<string, number>;
  samples?: number[];
  /** Further sample sets of one row, by metric key (xds: changeAtProxyMs). */
  moreSamples?: Record<string, number[]>;
  error?: string;
  /** The target's configuration as generated (nginx conf, haproxy cfg, Envoy bootstrap). */
  config?: string;
}

export interface ScenarioResult {
  scenario: Scenario;
  title: string;
  startedAt: string;
  seconds: number;
  /** The metric ratios and acceptance checks are computed on. */
  primary: string;
  columns: Column[];
  rows: Row[];
  settings: Record<string, string | number>;
  /** /proc/loadavg when the scenario started and ended (the machine is shared). */
  load?: { start: string; end: string };
  /** Configurations of helpers (e.g. the L7 backend), recorded in the JSON only. */
  helperConfigs?: Record<string, string>;
}

/** An acceptance ratio from the issue: `target / baseline >= min` on `metric`. */
export interface Acceptance {
  scenario: Scenario;
  name: string;
  target: TargetName;
  baseline: TargetName;
  min: number;
}

export interface CheckOutcome {
  name: string;
  status: 'PASS' | 'FAIL' | 'SKIP';
  ratio?: number;
  min: number;
  detail: string;
  /** What passing takes, when it is not `ratio >= min` (e.g. `need <= 50`). */
  need?: string;
}
