/**
 * Config compilation on mutated real configs: the input bytes pick a fixture (a bootstrap, or a
 * listener / cluster / route table / endpoint assignment from istiod's dumps) and a few structural
 * mutations (retype, delete, swap, duplicate, new strings and numbers); the result goes through the
 * compiler the proxy uses for it, or is protobuf-encoded, byte-mutated and decoded first (the xDS
 * path). Invariant: it compiles, or fails with a ConfigError that names a field. Anything else
 * (TypeError, RangeError, ...) is a crash.
 */
import { compileBootstrap } from '../../packages/proxy/src/config/bootstrap.ts';
import { Msg } from '../../packages/proxy/src/config/fields.ts';
import { ConfigError } from '../../packages/proxy/src/core/errors.ts';
import { compileOrWait } from '../../packages/proxy/src/xds/resource-refs.ts';
import { compileCluster, readLoadAssignment } from '../../packages/proxy/src/upstream/cluster-config.ts';
import { RouteTable } from '../../packages/proxy/src/http/route-config.ts';
import { decodeResource } from '../../packages/proxy/src/xds/decode.ts';
import { encodeResource } from '../../packages/proxy/src/xds/encode.ts';
// The registries load filters on first use with require(); under Jazzer's CJS hooks that path would
// read the .ts unstripped, so every filter module is imported here, through the instrumenting loader.
import '../../packages/proxy/src/filters/http/fault/config.ts';
import '../../packages/proxy/src/filters/http/cors/config.ts';
import '../../packages/proxy/src/filters/http/istio_stats/filter.ts';
import '../../packages/proxy/src/filters/http/metadata_exchange/config.ts';
import '../../packages/proxy/src/filters/http/alpn/config.ts';
import '../../packages/proxy/src/filters/http/grpc_stats/filter.ts';
import '../../packages/proxy/src/filters/http/rbac/config.ts';
import '../../packages/proxy/src/filters/http/jwt_authn/config.ts';
import '../../packages/proxy/src/filters/http/set_filter_state/config.ts';
import '../../packages/proxy/src/filters/http/connect_authority/config.ts';
import '../../packages/proxy/src/filters/http/connect_baggage/config.ts';
import '../../packages/proxy/src/filters/http/ext_authz/config.ts';
import '../../packages/proxy/src/filters/http/peer_metadata/config.ts';
import '../../packages/proxy/src/filters/http/compressor/config.ts';
import '../../packages/proxy/src/filters/network/istio_stats/filter.ts';
import '../../packages/proxy/src/filters/network/metadata_exchange/filter.ts';
import '../../packages/proxy/src/filters/network/rbac/config.ts';
import '../../packages/proxy/src/filters/network/istio_authn/config.ts';
import '../../packages/proxy/src/filters/network/set_filter_state/config.ts';
import '../../packages/proxy/src/filters/network/http_connection_manager/terminal.ts';
import '../../packages/proxy/src/filters/network/tcp_proxy/terminal.ts';
import { seeds, type Seed, type SeedKind } from './lib-config-seeds.ts';
import { Bytes, mutate } from './lib-mutate.ts';
import { fail } from './invariant.ts';

const TYPE_URLS: Record<Exclude<SeedKind, 'bootstrap'>, string> = {
  listener: 'type.googleapis.com/envoy.config.listener.v3.Listener',
  cluster: 'type.googleapis.com/envoy.config.cluster.v3.Cluster',
  route: 'type.googleapis.com/envoy.config.route.v3.RouteConfiguration',
  endpoints: 'type.googleapis.com/envoy.config.endpoint.v3.ClusterLoadAssignment',
};

export function fuzz(data: Buffer): void {
  const all = seeds();
  const b = new Bytes(data);
  const seed = all[b.int(all.length)];
  const viaXds = seed.kind !== 'bootstrap' && b.int(4) === 0;
  const json = structuredClone(seed.json);
  const rounds = 1 + b.int(6);
  for (let i = 0; i < rounds && !b.done; i++) mutate(json, b);
  let resource: Record<string, unknown> = json;
  if (viaXds) {
    const encoded = expectConfigError(seed, () => encodeResource({ '@type': TYPE_URLS[seed.kind as Exclude<SeedKind, 'bootstrap'>], ...json }));
    if (!encoded) return;
    const bytes = Buffer.from(encoded.value);
    // A few byte flips in the wire form: what a broken or hostile control plane could send.
    for (let i = 0, n = b.int(4); i < n && bytes.length; i++) bytes[b.int(bytes.length)] = b.int(256);
    // Bytes that are not the message at all fail as a whole, naming the type URL instead of a field.
    const decoded = expectConfigError(seed, () => decodeResource({ type_url: encoded.type_url, value: bytes }), true);
    if (!decoded) return;
    resource = decoded;
  }
  expectConfigError(seed, () => compile(seed.kind, resource));
}

function compile(kind: SeedKind, json: Record<string, unknown>): unknown {
  switch (kind) {
    case 'bootstrap': return compileBootstrap(json);
    case 'listener': return compileOrWait(json);
    case 'cluster': return compileCluster(new Msg(json, ''));
    case 'route': return new RouteTable(new Msg(json, 'route_config'));
    case 'endpoints': return readLoadAssignment(new Msg(json, ''), 'EDS');
  }
}

/** Runs `f`; a ConfigError naming a field is an accepted outcome (undefined), anything else thrown is a finding. */
function expectConfigError<T>(seed: Seed, f: () => T, wholeResource = false): T | undefined {
  try {
    return f();
  } catch (err) {
    if (err instanceof ConfigError && (err.path !== '' || wholeResource)) return undefined;
    if (err instanceof ConfigError) fail('ConfigError without a field path', { seed: seed.name, kind: seed.kind, message: err.message });
    throw err;
  }
}
