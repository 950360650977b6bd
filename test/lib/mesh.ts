// A local CA (the control plane's, in this process) and what a workload needs to get
// certificates from it the way istio-agent does: a working directory holding
// ./var/run/secrets/tokens/istio-token and ./var/run/secrets/istio/root-cert.pem,
// plus pilot-agent's environment. Also istiod-shaped ISTIO_MUTUAL TLS config fragments.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { CertificateAuthority } from '../../packages/controlplane/src/ca/authority.ts';
import { startCaServer, type CaServer } from '../../packages/controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../packages/controlplane/src/ca/token.ts';
import type { Json } from './proxy.ts';
import { T } from './config.ts';

export interface LocalCa {
  readonly ca: CertificateAuthority;
  readonly tokens: TokenAuthority;
  readonly server: CaServer;
  readonly address: string;
  close(): Promise<void>;
}

export async function startLocalCa(opts: { maxTtlSec?: number } = {}): Promise<LocalCa> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-ca-'));
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: dir, maxTtlSec: opts.maxTtlSec });
  const tokens = TokenAuthority.create(dir);
  const server = await startCaServer({ ca, tokens, listen: '127.0.0.1:0' });
  return {
    ca, tokens, server, address: `127.0.0.1:${server.port}`,
    async close() { await server.close(); rmSync(dir, { recursive: true, force: true }); },
  };
}

export interface Workload {
  readonly dir: string;
  readonly env: Record<string, string>;
  readonly spiffe: string;
  remove(): void;
}

/** A workload's working directory and environment for service account `sa` in `ns`. */
export function workload(local: LocalCa, ns: string, sa: string, env: Record<string, string> = {}): Workload {
  const dir = mkdtempSync(path.join(tmpdir(), `skua-wl-${sa}-`));
  mkdirSync(path.join(dir, 'var/run/secrets/tokens'), { recursive: true });
  mkdirSync(path.join(dir, 'var/run/secrets/istio'), { recursive: true });
  writeFileSync(path.join(dir, 'var/run/secrets/tokens/istio-token'), local.tokens.issue({ namespace: ns, serviceAccount: sa }, 3600));
  writeFileSync(path.join(dir, 'var/run/secrets/istio/root-cert.pem'), local.ca.rootCertPem);
  return {
    dir, spiffe: `spiffe://cluster.local/ns/${ns}/sa/${sa}`,
    env: { CA_ADDR: local.address, POD_NAMESPACE: ns, SERVICE_ACCOUNT: sa, TRUST_DOMAIN: 'cluster.local', ...env },
    remove: () => rmSync(dir, { recursive: true, force: true }),
  };
}

/** SdsSecretConfig as istiod writes it (the sds-grpc cluster of istio-agent). */
export function sds(name: string): Json {
  return {
    name,
    sds_config: {
      api_config_source: { api_type: 'GRPC', grpc_services: [{ envoy_grpc: { cluster_name: 'sds-grpc' } }], set_node_on_first_message_only: true, transport_api_version: 'V3' },
      initial_fetch_timeout: '0s', resource_api_version: 'V3',
    },
  };
}

const ISTIO_CIPHERS = ['ECDHE-ECDSA-AES256-GCM-SHA384', 'ECDHE-RSA-AES256-GCM-SHA384', 'ECDHE-ECDSA-AES128-GCM-SHA256', 'ECDHE-RSA-AES128-GCM-SHA256', 'AES256-GCM-SHA384', 'AES128-GCM-SHA256'];

/** The inbound DownstreamTlsContext of istiod's sidecar chains (STRICT / PERMISSIVE mTLS). */
export function istioDownstreamTls(alpn: readonly string[] = ['istio-peer-exchange', 'h2', 'http/1.1']): Json {
  return {
    name: 'envoy.transport_sockets.tls',
    typed_config: {
      '@type': T.downstreamTls,
      common_tls_context: {
        tls_params: { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3', cipher_suites: ISTIO_CIPHERS },
        alpn_protocols: alpn,
        tls_certificate_sds_secret_configs: [sds('default')],
        combined_validation_context: {
          default_validation_context: { match_subject_alt_names: [{ prefix: 'spiffe://cluster.local/' }] },
          validation_context_sds_secret_config: sds('ROOTCA'),
        },
      },
      require_client_certificate: true,
    },
  };
}

/** The tlsMode-istio transport_socket_matches of istiod's outbound clusters. */
export function istioSocketMatches(sans: readonly string[], sni: string, validation?: Json): Json[] {
  return [
    {
      name: 'tlsMode-istio',
      match: { tlsMode: 'istio' },
      transport_socket: {
        name: 'envoy.transport_sockets.tls',
        typed_config: {
          '@type': T.upstreamTls,
          common_tls_context: {
            tls_params: { tls_minimum_protocol_version: 'TLSv1_2', tls_maximum_protocol_version: 'TLSv1_3' },
            alpn_protocols: ['istio-peer-exchange', 'istio'],
            tls_certificate_sds_secret_configs: [sds('default')],
            ...(validation ? { validation_context: validation } : {
              combined_validation_context: {
                default_validation_context: { match_subject_alt_names: sans.map((exact) => ({ exact })) },
                validation_context_sds_secret_config: sds('ROOTCA'),
              },
            }),
          },
          sni,
        },
      },
    },
    { name: 'tlsMode-disabled', match: {}, transport_socket: { name: 'envoy.transport_sockets.raw_buffer', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.transport_sockets.raw_buffer.v3.RawBuffer' } } },
  ];
}

/** A STATIC cluster whose endpoints carry tlsMode metadata, with istiod's transport_socket_matches. */
export function meshCluster(name: string, port: number, sans: readonly string[], opts: { tlsMode?: string; validation?: Json; extra?: Json } = {}): Json {
  return {
    name, type: 'STATIC', connect_timeout: '2s', lb_policy: 'ROUND_ROBIN',
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{
        endpoint: { address: { socket_address: { address: '127.0.0.1', port_value: port } } },
        metadata: { filter_metadata: { 'envoy.transport_socket_match': { tlsMode: opts.tlsMode ?? 'istio' } } },
      }] }],
    },
    transport_socket_matches: istioSocketMatches(sans, `outbound_.${port}_._.${name}.default.svc.cluster.local`, opts.validation),
    ...(opts.extra ?? {}),
  };
}
