/** SPIFFE identities as Istio writes them: spiffe://<trust-domain>/ns/<namespace>/sa/<service-account>. */
export interface SpiffeId {
  readonly trustDomain: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

export function spiffeUri(id: SpiffeId): string {
  return `spiffe://${id.trustDomain}/ns/${id.namespace}/sa/${id.serviceAccount}`;
}

const SPIFFE_RE = /^spiffe:\/\/([^/]+)\/ns\/([^/]+)\/sa\/([^/]+)$/;

/** The parts of an Istio SPIFFE id, or undefined when `uri` is not one. */
export function parseSpiffeUri(uri: string): SpiffeId | undefined {
  const m = SPIFFE_RE.exec(uri);
  return m ? { trustDomain: m[1], namespace: m[2], serviceAccount: m[3] } : undefined;
}
