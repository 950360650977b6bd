/**
 * pilot-agent's end of life, in-process. SIGTERM drains the inbound listeners (a sidecar; a
 * gateway drains all) as the agent's POST /drain_listeners?inboundonly&graceful asks Envoy to:
 * they keep accepting, every HTTP/1 response carries `connection: close` and HTTP/2 sessions get
 * GOAWAY (pilot-agent runs Envoy with --drain-strategy immediate), outbound listeners carry on for
 * the app's own calls. Then it waits terminationDrainDuration (5 s) and exits 0. With
 * EXIT_ON_ZERO_ACTIVE_CONNECTIONS it waits MINIMUM_DRAIN_DURATION (5 s) instead, then reads the
 * listeners' downstream_cx_active every second and exits once none is left (Kubernetes'
 * terminationGracePeriodSeconds is the bound). POST /quitquitquit on the status port exits
 * without draining (a job's last step); POST /drain starts the drain and keeps running.
 */
import { log } from '../core/log.ts';
import type { DrainStrategy } from '../core/drain.ts';
import type { StatsStore } from '../stats/store.ts';
import { parseGoDuration } from '../tls/identity-env.ts';
import { parseGoBool } from './metadata-fields.ts';
import type { Env } from './node-metadata.ts';

export interface LifecycleSettings {
  readonly terminationDrainMs: number;
  readonly minimumDrainMs: number;
  readonly exitOnZeroActiveConnections: boolean;
  /** Sidecars drain their inbound listeners only; gateways every listener. */
  readonly inboundOnly: boolean;
  /** The agent's own listeners (readiness, Prometheus): their connections never hold the exit. */
  readonly ownListenerPorts: readonly number[];
}

/** What the lifecycle needs of the running proxy. */
export interface DrainTarget {
  drainListeners(inboundOnly: boolean, graceful: boolean, ms?: number, strategy?: DrainStrategy): void;
  collectStats(): Promise<StatsStore>;
}

/** How often pilot-agent reads downstream_cx_active while waiting for zero. */
const ACTIVE_CONNECTION_CHECK_MS = 1000;

/** Istio's env.Register for a duration: unset → the default; a value Go cannot parse → logged, the default. */
export function envDurationMs(env: Env, name: string, fallbackMs: number): number {
  const v = env[name];
  if (v === undefined || v === '') return fallbackMs;
  if (/^0+(?:\.0*)?(?:ns|us|µs|ms|s|m|h)?$/.test(v.trim())) return 0;
  try {
    return parseGoDuration(v, name) * 1000;
  } catch (err) {
    log.warn(`${(err as Error).message}; using ${fallbackMs / 1000}s`);
    return fallbackMs;
  }
}

export function lifecycleSettings(env: Env, opts: { terminationDrainS: number; sidecar: boolean; ownListenerPorts: readonly number[] }): LifecycleSettings {
  return {
    terminationDrainMs: opts.terminationDrainS * 1000,
    minimumDrainMs: envDurationMs(env, 'MINIMUM_DRAIN_DURATION', 5000),
    exitOnZeroActiveConnections: parseGoBool(env.EXIT_ON_ZERO_ACTIVE_CONNECTIONS ?? 'false') === true,
    inboundOnly: opts.sidecar,
    ownListenerPorts: opts.ownListenerPorts,
  };
}

/**
 * pilot-agent's count: every listener's downstream_cx_active except the agent's own listeners
 * and per-worker copies; -1 when no listener reports one.
 */
export function activeConnections(stats: StatsStore, ownListenerPorts: readonly number[]): number {
  let n = -1;
  // Listener stats may be scoped (listener.<address>. groups) or flat: each() reads both.
  stats.each('gauges', (name, gauge) => {
    if (!name.startsWith('listener.') || !name.endsWith('.downstream_cx_active') || name.includes('.worker_')) return;
    if (ownListenerPorts.some((p) => name === `listener.0.0.0.0_${p}.downstream_cx_active` || name === `listener.[::]_${p}.downstream_cx_active`)) return;
    n = Math.max(n, 0) + gauge.value;
  });
  return n;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The agent's shutdown state: running → draining → exiting. `exit` stops everything and ends
 * the process; it is called once.
 */
export class AgentLifecycle {
  private readonly settings: LifecycleSettings;
  private readonly target: () => DrainTarget | undefined;
  private readonly exit: (code: number) => void;
  private drained = false;
  private terminating = false;
  private exited = false;

  constructor(settings: LifecycleSettings, target: () => DrainTarget | undefined, exit: (code: number) => void) {
    this.settings = settings;
    this.target = target;
    this.exit = exit;
  }

  get draining(): boolean {
    return this.drained;
  }

  /** POST /drain (and the first step of SIGTERM): inbound listeners drain; nothing exits. */
  drain(): void {
    if (this.drained) return;
    const server = this.target();
    if (!server) return;
    this.drained = true;
    log.info(`agent draining proxy: ${this.settings.inboundOnly ? 'inbound listeners' : 'all listeners'}, immediate`);
    server.drainListeners(this.settings.inboundOnly, true, undefined, 'immediate');
  }

  /**
   * SIGTERM / SIGINT. A second signal while draining ends the process at once (pilot-agent's
   * Kubernetes never sends one: it follows with SIGKILL).
   */
  async terminate(signal: string): Promise<void> {
    if (this.terminating) { log.warn(`${signal} again while draining: exiting now`); this.finish(); return; }
    this.terminating = true;
    const server = this.target();
    // Not started yet (waiting for istiod or the certificate): nothing to drain.
    if (!server) { this.finish(); return; }
    this.drain();
    const s = this.settings;
    if (!s.exitOnZeroActiveConnections) {
      log.info(`graceful termination period is ${s.terminationDrainMs / 1000}s, starting...`);
      await sleep(s.terminationDrainMs);
      log.info('graceful termination period complete, terminating the proxy');
      this.finish();
      return;
    }
    log.info(`agent draining proxy for ${s.minimumDrainMs / 1000}s, then waiting for active connections to terminate...`);
    await sleep(s.minimumDrainMs);
    for (;;) {
      if (this.exited) return;
      const active = activeConnections(await server.collectStats(), s.ownListenerPorts);
      if (active <= 0) {
        log.info(active === 0 ? 'there are no more active connections. terminating proxy...' : 'downstream_cx_active is not available: terminating proxy...');
        this.finish();
        return;
      }
      log.info(`there are still ${active} active connections`);
      await sleep(ACTIVE_CONNECTION_CHECK_MS);
    }
  }

  /** POST /quitquitquit: a job is done; exit without draining. */
  quit(): void {
    log.info('handling /quitquitquit, exiting');
    this.finish();
  }

  private finish(): void {
    if (this.exited) return;
    this.exited = true;
    this.exit(0);
  }
}
