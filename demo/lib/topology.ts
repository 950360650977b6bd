/**
 * What a demo topology declares; run.ts does the rest (ports, files, processes, readiness, checks,
 * load, summary, stop): `mesh` (sidecars configured by skua-controlplane from a mesh file, mTLS from
 * its CA) and `bookinfo` (sample apps behind one skua-proxy on a static bootstrap).
 */
export interface ProcessSpec {
  readonly name: string;
  /** A Node entry script, relative to the repository root. */
  readonly script: string;
  readonly args?: readonly string[];
  readonly env?: Record<string, string>;
  /** Working directory (default: the demo's own), e.g. a sidecar's with ./var/run/secrets/... */
  readonly cwd?: string;
  /** Run just before the process starts (after the ones before it are ready), e.g. to mint a token. */
  readonly prepare?: () => Promise<void>;
  /**
   * Ready when this port accepts connections, or when this Envoy admin port answers /ready (on `host`,
   * default 127.0.0.1); a function is asked after `prepare` (for ports chosen there).
   */
  readonly ready: ReadySpec | (() => ReadySpec);
  /** Start without waiting for the previous process to be ready (the next non-concurrent one waits for all). */
  readonly concurrent?: boolean;
  /** A proxy: its stdout is its access log (tail shown in the summary, echoed with --keep). */
  readonly proxy?: boolean;
}

export type ReadySpec = { readonly port: number; readonly host?: string } | { readonly admin: number; readonly host?: string };

/** One kind of request in the load mix. */
export interface LoadTarget {
  readonly label: string;
  /** Default 127.0.0.1. */
  readonly host?: string;
  readonly port: number;
  readonly path: string;
  readonly weight: number;
  readonly expect: number;
  readonly headers?: Record<string, string>;
}

/** A one-shot check: resolves with a short detail, throws when the behaviour is wrong. */
export interface Check {
  readonly name: string;
  run(): Promise<string>;
}

export interface Topology {
  readonly title: string;
  /** Files written into the run's temp dir before anything starts (name → contents). */
  readonly files: Record<string, string>;
  /** Started in order; each must be ready before the next starts. */
  readonly processes: readonly ProcessSpec[];
  readonly checks: readonly Check[];
  readonly load: readonly LoadTarget[];
  /** A response header whose values show a traffic split, and the expected shares. */
  readonly split?: { readonly header: string; readonly expect: Record<string, number> };
  /** Admin ports to read stats from, and which stats to show. */
  readonly admins: ReadonlyArray<{ readonly name: string; readonly port: number; readonly host?: string }>;
  readonly stats: RegExp;
  /** What a person can try while `--keep` holds the topology up. */
  readonly urls: readonly string[];
}

export interface TopologyOptions {
  readonly dir: string;
  readonly concurrency: number;
  readonly logLevel: string;
}
