/**
 * The gRPC metadata pilot-agent's xDS proxy attaches to its stream to istiod: the pod's
 * istio-token as `authorization: Bearer <jwt>` (istiod authenticates the proxy with it), the
 * `ClusterID` the pod runs in, and any XDS_HEADER_* extras. Read again on every (re)connect,
 * because the kubelet rotates the projected token in place.
 */
import { readFileSync } from 'node:fs';
import { log } from '../core/log.ts';

export interface XdsCredentialSource {
  readonly tokenPath: string | undefined;
  readonly clusterId: string;
  readonly extraXdsHeaders: Readonly<Record<string, string>>;
}

export function readToken(path: string): string | undefined {
  try {
    const token = readFileSync(path, 'utf8').trim();
    return token || undefined;
  } catch (err) {
    log.warn(`xDS: cannot read the token ${path}: ${(err as Error).message}; connecting without one`);
    return undefined;
  }
}

export function xdsHeaders(src: XdsCredentialSource): () => Record<string, string> {
  return () => {
    const headers: Record<string, string> = { ClusterID: src.clusterId, ...src.extraXdsHeaders };
    const token = src.tokenPath ? readToken(src.tokenPath) : undefined;
    if (token) headers.authorization = `Bearer ${token}`;
    return headers;
  };
}
