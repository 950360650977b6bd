/**
 * @skua/proxy/envoy — the sidecar's Envoy layer: bootstrap compile, the dynamic (xDS) config
 * with warming, the cluster and listener managers, and the server that runs them; pilot-agent's
 * `proxy` command (skua-waypoint runs `proxy waypoint`) and the stats inclusion list its bootstrap
 * renders. For the waypoint and for tests and benches that load
 * istiod's output. Re-exports only.
 */
export { compileBootstrap, loadBootstrapSource, type BootstrapConfig, type CompileOptions } from '../config/bootstrap.ts';
export { ProxyServer, VERSION, type ServerOptions, type ServerState } from '../server.ts';
export { DynamicConfig } from '../xds/dynamic-config.ts';
export { ClusterManager } from '../upstream/manager.ts';
export { ListenerManager } from '../listener/manager.ts';
export { StatsStore } from '../stats/store.ts';
export { runPilotProxy } from '../agent/commands.ts';
export { istioStatsMatcher, type StatsInclusionInputs } from '../agent/stats-inclusion.ts';
