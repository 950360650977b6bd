/**
 * pilot-agent's `proxy` and `wait` commands, loaded on first use: they bring prom-client, the DNS
 * proxy and the CA client, which a static Envoy-style proxy never needs (issue 13). skua-proxy's
 * command line and skua-waypoint both start here.
 */

/** `proxy sidecar|router|waypoint [flags]`: an exit code, or -1 while the proxy runs. */
export async function runPilotProxy(argv: readonly string[]): Promise<number> {
  return (await import('./run-agent.ts')).runPilotProxy(argv);
}

/** `wait [flags]`: polls the readiness URL until it answers 200. */
export async function runPilotWait(argv: readonly string[]): Promise<number> {
  return (await import('./run-agent.ts')).runPilotWait(argv);
}
