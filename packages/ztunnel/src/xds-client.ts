/**
 * The WDS stream: Delta ADS to XDS_ADDRESS (istiod or skua-controlplane) through the core's ADS
 * client, subscribing to every istio.workload.Address and istio.security.Authorization with
 * ztunnel's node, bearer token and cluster id. TLS (https://) verifies the control plane against
 * XDS_ROOT_CA (ALT_XDS_HOSTNAME overrides the name checked); http:// or host:port is plaintext.
 * Reconnects with back-off keep the last good state serving.
 */
import { readFileSync } from 'node:fs';
import { credentials as grpcCredentials, type ChannelCredentials } from '@grpc/grpc-js';
import { AdsClient, StatsStore } from './core.ts';
import { authHeaders, xdsNode, type RootCert, type ZtunnelConfig } from './config.ts';
import type { WdsHandler } from './state/updater.ts';

export interface GrpcTarget {
  readonly target: string;
  readonly credentials: ChannelCredentials;
  readonly authority: string | undefined;
}

function rootPem(root: RootCert): Buffer | undefined {
  if (root.kind === 'system') return undefined;
  return root.kind === 'file' ? readFileSync(root.path) : Buffer.from(root.pem);
}

/** `https://host:port` → TLS target; `http://host:port` or `host:port` → plaintext. */
export function grpcTarget(address: string, root: RootCert, altHostname: string | undefined): GrpcTarget {
  const tls = address.startsWith('https://');
  const target = address.replace(/^https?:\/\//, '').replace(/\/$/, '');
  if (!tls) return { target, credentials: grpcCredentials.createInsecure(), authority: undefined };
  // A root that is neither a file nor SYSTEM was given inline; a missing default file falls back to the system roots.
  const pem = root.kind === 'pem' && !root.pem.includes('BEGIN CERTIFICATE') ? undefined : rootPem(root);
  return { target, credentials: grpcCredentials.createSsl(pem), authority: altHostname };
}

export function startWdsClient(cfg: ZtunnelConfig, handler: WdsHandler, store: StatsStore, env: Readonly<Record<string, string | undefined>> = process.env): AdsClient {
  if (!cfg.xdsAddress) throw new Error('XDS_ADDRESS is empty: no control plane to connect to');
  const t = grpcTarget(cfg.xdsAddress, cfg.xdsRootCert, cfg.altXdsHostname);
  const client = new AdsClient({
    target: t.target, credentials: t.credentials, authority: t.authority, delta: true,
    node: xdsNode(cfg, env), headers: () => authHeaders(cfg, cfg.xdsHeaders),
  }, handler, store);
  client.start();
  return client;
}
