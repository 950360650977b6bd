/** A workload's directory as istio-agent expects it (projected token, CA root) and pilot-agent's CA environment. */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import type { CertificateAuthority } from '../../packages/controlplane/src/ca/authority.ts';
import type { TokenAuthority } from '../../packages/controlplane/src/ca/token.ts';

export function workloadDir(root: string, sa: string, ca: CertificateAuthority, tokens: TokenAuthority, caAddr: string): { dir: string; env: Record<string, string> } {
  const dir = path.join(root, sa);
  mkdirSync(path.join(dir, 'var/run/secrets/tokens'), { recursive: true });
  mkdirSync(path.join(dir, 'var/run/secrets/istio'), { recursive: true });
  writeFileSync(path.join(dir, 'var/run/secrets/tokens/istio-token'), tokens.issue({ namespace: 'default', serviceAccount: sa }, 3600));
  writeFileSync(path.join(dir, 'var/run/secrets/istio/root-cert.pem'), ca.rootCertPem);
  return { dir, env: { CA_ADDR: caAddr, POD_NAMESPACE: 'default', SERVICE_ACCOUNT: sa } };
}
