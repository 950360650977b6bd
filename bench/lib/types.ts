/** Shared shapes for the benchmark harness (bench/run.ts). */

export type Scenario = 'l7' | 'l4' | 'micro' | 'routes' | 'xds' | 'xds-scale' | 'mtls' | 'sidecar-pair';
export type TargetName = 'direct' | 'nginx' | 'haproxy' | 'skua';

export const ALL_SCENARIOS: readonly Scenario[] = ['l7', 'l4', 'micro', 'routes', 'xds', 'xds-scale', 'mtls', 'sidecar-pair'];
export const DEFAULT_SCENARIOS: readonly Scenario[] = ['l7', 'l4'];
export const ALL_TARGETS: readonly TargetName[] = ['direct', 'nginx', 'haproxy', 'skua'];

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
  /** skua-proxy entry script, relative to the repository root. */
  skuaMain: string;
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
  label: string;
  metrics: Record<string, number>;
  samples?: number[];
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
