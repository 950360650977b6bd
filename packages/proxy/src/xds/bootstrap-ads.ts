/**
 * Bootstrap `dynamic_resources` → how to reach the ADS server: the gRPC target (the
 * named static cluster's first endpoint), TLS credentials from that cluster's
 * UpstreamTlsContext, and the protocol (SotW `GRPC` or `DELTA_GRPC`).
 */
import { resolve } from 'node:path';
import { createRequire } from 'node:module';
import type { ChannelCredentials } from '@grpc/grpc-js';
import { checkServerIdentity, type PeerCertificate } from 'node:tls';
import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';

export interface DynamicResources {
  readonly delta: boolean;
  readonly clusterName: string;
  /** envoy_grpc.authority / google_grpc target, when given. */
  readonly authority: string;
  readonly initialMetadata: Readonly<Record<string, string>>;
  readonly lds: boolean;
  readonly cds: boolean;
  /** initial_fetch_timeout of CDS and of LDS, each timing its own subscription (0 = wait forever, as Istio sets it). */
  readonly cdsInitialFetchTimeoutMs: number;
  readonly ldsInitialFetchTimeoutMs: number;
}

export interface AdsTransport {
  readonly target: string;
  readonly credentials: ChannelCredentials;
  readonly authority: string | undefined;
}

export function readDynamicResources(m: Msg): DynamicResources {
  for (const f of ['lds_resources_locator', 'cds_resources_locator']) if (m.has(f)) throw m.error(f, 'xDS-TP locators are not supported');
  const ads = m.msg('ads_config');
  if (!ads) throw m.error('ads_config', 'only ADS (ads_config with lds_config/cds_config `ads: {}`) is supported');
  const apiType = ads.str('api_type', 'GRPC');
  if (apiType !== 'GRPC' && apiType !== 'DELTA_GRPC' && apiType !== 'AGGREGATED_GRPC' && apiType !== 'AGGREGATED_DELTA_GRPC') {
    throw ads.error('api_type', `${apiType} is not supported (GRPC or DELTA_GRPC)`);
  }
  const services = ads.list('grpc_services');
  if (services.length !== 1) throw ads.error('grpc_services', 'exactly one gRPC service is required');
  const svc = services[0];
  const eg = svc.msg('envoy_grpc');
  if (!eg) throw svc.error('envoy_grpc', 'is required (google_grpc is not supported)');
  const initialMetadata: Record<string, string> = {};
  for (const h of svc.list('initial_metadata')) initialMetadata[h.requiredStr('key').toLowerCase()] = h.str('value');
  const timeouts: number[] = [];
  const sources: boolean[] = [];
  for (const key of ['lds_config', 'cds_config']) {
    const cs = m.msg(key);
    sources.push(cs !== undefined);
    if (cs && !cs.has('ads')) throw cs.error('', 'only `ads: {}` config sources are supported');
    timeouts.push(cs ? cs.durationMs('initial_fetch_timeout', 15_000) : 15_000);
  }
  return {
    delta: apiType.includes('DELTA'), clusterName: eg.requiredStr('cluster_name'), authority: eg.str('authority'), initialMetadata,
    lds: sources[0], cds: sources[1], ldsInitialFetchTimeoutMs: timeouts[0], cdsInitialFetchTimeoutMs: timeouts[1],
  };
}

const require = createRequire(import.meta.url);
const requireGrpc = (): typeof import('@grpc/grpc-js') => require('@grpc/grpc-js') as typeof import('@grpc/grpc-js');

/** The static cluster that carries ADS, as a gRPC channel target and credentials. */
export function adsTransport(cluster: Msg, authority: string): AdsTransport {
  // grpc-js loads only for a bootstrap with ADS: a static proxy never holds it (issue 13).
  const { credentials } = requireGrpc();
  const la = cluster.requiredMsg('load_assignment');
  const ep = la.list('endpoints')[0]?.list('lb_endpoints')[0]?.msg('endpoint');
  const addr = ep?.msg('address');
  if (!addr) throw la.error('endpoints', 'the ADS cluster needs an endpoint');
  let target: string;
  const pipe = addr.msg('pipe');
  if (pipe) target = `unix:${resolve(pipe.requiredStr('path'))}`;
  else {
    const sa = addr.requiredMsg('socket_address');
    const host = sa.requiredStr('address');
    target = `${host.includes(':') ? `[${host}]` : host}:${sa.num('port_value')}`;
  }
  const ts = cluster.msg('transport_socket');
  const tls = ts?.msg('typed_config');
  if (!tls || tls.str('@type').endsWith('RawBuffer')) return { target, credentials: credentials.createInsecure(), authority: authority || undefined };
  const common = tls.msg('common_tls_context');
  const vc = common?.msg('validation_context') ?? common?.msg('combined_validation_context')?.msg('default_validation_context');
  const ca = vc?.msg('trusted_ca');
  const cert = common?.list('tls_certificates')[0];
  const sanExact = (vc?.list('match_subject_alt_names') ?? []).map((s) => s.str('exact')).filter((s) => s !== '');
  const sni = tls.str('sni');
  const creds = credentials.createSsl(
    ca ? readDataSource(ca) : null,
    cert?.msg('private_key') ? readDataSource(cert.requiredMsg('private_key')) : null,
    cert?.msg('certificate_chain') ? readDataSource(cert.requiredMsg('certificate_chain')) : null,
    {
      // Istio checks istiod's SPIFFE / DNS SAN (PILOT_SAN), not the dialled host name.
      checkServerIdentity: (host: string, peer: PeerCertificate) => {
        if (sanExact.length === 0) return checkServerIdentity(sni || host, peer);
        const sans = (peer.subjectaltname ?? '').split(', ').map((s) => s.replace(/^(DNS|URI|IP Address):/, ''));
        return sanExact.some((s) => sans.includes(s)) ? undefined : new Error(`xDS server certificate SANs ${peer.subjectaltname ?? ''} match none of ${sanExact.join(', ')}`);
      },
    },
  );
  return { target, credentials: creds, authority: authority || sni || undefined };
}
