/**
 * A ProxyServer's xDS side: the dynamic config, the ADS client and what the main thread hands the
 * worker threads. Loaded only for a bootstrap with dynamic_resources: with it come the xDS decoders
 * and protobufjs, which a static proxy never needs (issue 13).
 */
import { createRequire } from 'node:module';
import { DynamicConfig, type ExtraTypeSink } from './xds/dynamic-config.ts';
import { adsTransport } from './xds/bootstrap-ads.ts';
import { Msg } from './config/fields.ts';
import type { XdsRejection, XdsUpdate } from './xds/types.ts';
import { log } from './core/log.ts';
import { TYPE_URL } from './xds/type-urls.ts';
import { secrets } from './tls/secrets.ts';
import { followerUpdates } from './xds/follower-updates.ts';
import { TimeSlice } from './core/time-slice.ts';
import { setUnknownFieldPolicy } from './xds/decode.ts';
import { workloadDiscovery } from './telemetry/istio/workload-peers.ts';
import { VERSION, type ProxyServer } from './server.ts';

const require = createRequire(import.meta.url);

/** Distinct unknown dynamic fields logged once each (bounded: a control plane could send many). */
const MAX_LOGGED_UNKNOWN = 1000;

/** istio.workload.BootstrapExtension: every Workload delivered over ADS feeds this thread's peer index. */
const WORKLOAD_SINK: ExtraTypeSink = {
  wildcard: true,
  apply: (name, json) => workloadDiscovery.apply(name, json),
  remove: (name) => workloadDiscovery.remove(name),
};

/** dynamic_resources: connect ADS and wait for the first CDS/LDS (Envoy's init manager). */
export async function startXds(server: ProxyServer): Promise<void> {
  const { bootstrap, options, stats, listeners } = server;
  const dr = bootstrap.dynamic!;
  const dynamic = new DynamicConfig(server.clusters, listeners,
    new Set(bootstrap.clusters.map((c) => c.name)), new Set(bootstrap.listeners.map((l) => l.name)));
  dynamic.gauges = (name, value) => stats.gauge(name).set(value);
  dynamic.counters = (name) => stats.counter(name).inc();
  server.dynamic = dynamic;
  // Workers get every secret from the main thread's store (workers.ts), ADS-pushed ones included;
  // they time no fetches and bind no probes: the main thread decides and forwards.
  // Workers apply the forwarded Workload updates too: each thread's peer lookups read its own index.
  if (bootstrap.extensions.workloadDiscovery) dynamic.setSink(TYPE_URL.workload, WORKLOAD_SINK);
  if (options.xdsFollower) { dynamic.fetchTimers.enabled = false; dynamic.retainConfig = false; return; }
  dynamic.recordClusterChanges = server.onXdsUpdate !== undefined;
  applyUnknownFieldPolicy(server);
  dynamic.setSink(TYPE_URL.secret, { apply: (name, json) => { secrets.update(name, json); }, remove: (name) => secrets.remove(name) });
  for (const [typeUrl, sink] of options.xdsSinks ?? []) dynamic.setSink(typeUrl, sink);
  dynamic.bindCheck = (config) => listeners.checkBind(config);
  dynamic.onFetchTimeout = (key) => server.onFetchTimeout?.(key);
  const cluster = bootstrap.clusters.find((c) => c.name === dr.clusterName)!;
  const transport = adsTransport(new Msg(cluster.source, `static_resources.clusters[${cluster.name}]`), dr.authority);
  const node = bootstrap.source.node as Record<string, unknown> | undefined ?? {};
  // The ADS client (and grpc-js) loads only where ADS is spoken: not in --concurrency workers.
  const { AdsClient } = require('./xds/ads-client.ts') as typeof import('./xds/ads-client.ts');
  const ads = new AdsClient({
    target: transport.target, credentials: transport.credentials, authority: transport.authority,
    headers: () => ({ ...dr.initialMetadata, ...options.xdsHeaders?.() }),
    node: { user_agent_name: 'envoy', user_agent_version: `skua-${VERSION}`, ...node }, delta: dr.delta,
  }, {
    interest: (typeUrl) => dynamic.interest(typeUrl),
    apply: async (update) => {
      const rejections = await dynamic.apply(update);
      if (server.onXdsUpdate) await forward(server, update, rejections, dynamic);
      return rejections;
    },
  }, stats);
  server.ads = ads;
  dynamic.interestChanged = () => ads.resubscribe();
  ads.start();
  dynamic.startInitialFetch(dr.cdsInitialFetchTimeoutMs, dr.ldsInitialFetchTimeoutMs);
  await dynamic.initialized;
}

/** Hands an applied update to the workers (CDS / EDS as what changed, in chunks: follower-updates.ts) and waits for them. */
async function forward(server: ProxyServer, update: XdsUpdate, rejections: readonly XdsRejection[], dynamic: DynamicConfig): Promise<void> {
  if (update.typeUrl !== TYPE_URL.cluster && update.typeUrl !== TYPE_URL.endpoint) { await server.onXdsUpdate?.(asApplied(update, rejections)); return; }
  const slice = new TimeSlice();
  let applied: Promise<void> | undefined;
  for (const part of followerUpdates(update, dynamic)) {
    if (slice.due) await slice.next();
    // Workers apply in order: the last part done means all are.
    applied = server.onXdsUpdate?.(part);
  }
  await applied;
}

/** Envoy's dynamic validation visitor: count every unknown field, log each distinct one once. */
function applyUnknownFieldPolicy(server: ProxyServer): void {
  const counter = server.stats.counter('server.dynamic_unknown_fields');
  const logged = new Set<string>();
  setUnknownFieldPolicy({
    mode: server.options.unknownDynamicFields ?? 'warn',
    onUnknown: (path, typeName, number) => {
      counter.inc();
      const key = `${typeName}#${number}`;
      if (logged.has(key) || logged.size >= MAX_LOGGED_UNKNOWN) return;
      logged.add(key);
      log.warn(`xDS: unknown field number ${number} of ${typeName}${path ? ` at ${path}` : ''} (ignored; --reject-unknown-dynamic-fields rejects it)`);
    },
  });
}

/**
 * An update as the main thread applied it, for the workers: what it refused (a listener that
 * could not bind, ...) is refused there too, so every thread serves the same config.
 */
function asApplied(u: XdsUpdate, rejections: readonly XdsRejection[]): XdsUpdate {
  const known = new Set((u.refused ?? []).map((r) => r.name));
  const extra = rejections.filter((r) => !known.has(r.name));
  if (extra.length === 0) return u;
  const names = new Set(extra.map((r) => r.name));
  return { ...u, resources: u.resources.filter((r) => !names.has(r.name)), refused: [...(u.refused ?? []), ...extra] };
}
