// Certificates for every local workload identity from the CA over gRPC (skua-controlplane's, as
// istiod): ztunnel authenticates with its own token and names the workload in
// ImpersonatedIdentity; the CA issues only to a trusted node account (istio-system/ztunnel);
// through the core's certificate manager, many identities are cached and fetched once; an
// unreachable CA fails the fetch with a clear error and a later fetch succeeds when it is back.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import { CertificateAuthority } from '../../controlplane/src/ca/authority.ts';
import { startCaServer, type CaServer } from '../../controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../controlplane/src/ca/token.ts';
import { CaError, CertificateManager } from '../src/core.ts';
import { loadConfig } from '../src/config.ts';
import { caRootPem, ztunnelIssuer } from '../src/identity/ca-issuer.ts';

const TD = 'cluster.local';
const id = (ns: string, sa: string): string => `spiffe://${TD}/ns/${ns}/sa/${sa}`;

describe('workload certificates from the CA', { timeout: 30_000 }, () => {
  let ca: CertificateAuthority, tokens: TokenAuthority, server: CaServer, port: number;
  before(async () => {
    ca = await CertificateAuthority.create({ trustDomain: TD, maxTtlSec: 48 * 3600 });
    tokens = TokenAuthority.create();
    server = await startCaServer({ ca, tokens, listen: '127.0.0.1:0', trustedNodeAccounts: ['istio-system/ztunnel'] });
    port = server.port;
  });
  after(() => server?.close());

  const cfgFor = (sa: string, caPort = port) => loadConfig({
    CA_ADDRESS: `https://127.0.0.1:${caPort}`, CA_ROOT_CA: ca.rootCertPem, XDS_ADDRESS: '', CLUSTER_ID: 'Kubernetes',
    AUTH_TOKEN: tokens.issue({ namespace: 'istio-system', serviceAccount: sa }), CA_HEADER_X_TEST: 'yes',
  }, tmpdir());

  test("ztunnel's token gets each workload its own identity, many at once, each fetched once", async () => {
    const cfg = cfgFor('ztunnel');
    const issuer = ztunnelIssuer(cfg);
    const mgr = new CertificateManager({ issue: issuer.issue, rootCertPem: caRootPem(cfg), ttlSec: 3600 });
    try {
      const ids = [id('default', 'sleep'), id('default', 'httpbin'), id('bookinfo', 'reviews')];
      const certs = await Promise.all([...ids, ...ids].map((i) => mgr.get(i)));
      for (const [i, c] of certs.entries()) {
        const leaf = new X509Certificate(c.chainPem);
        assert.equal(leaf.subjectAltName, `URI:${ids[i % 3]}`);
        assert.ok(leaf.verify(new X509Certificate(c.rootPem).publicKey));
      }
      assert.deepEqual([...server.issuedTo.keys()].sort(), [...ids].sort());
      assert.ok([...server.issuedTo.values()].every((n) => n === 1), 'one CSR per identity');
    } finally {
      mgr.stop();
      issuer.close();
    }
  });

  test('another service account may not impersonate', async () => {
    const issuer = ztunnelIssuer(cfgFor('sleep'));
    const mgr = new CertificateManager({ issue: issuer.issue, ttlSec: 3600 });
    try {
      await assert.rejects(mgr.get(id('default', 'httpbin')), (e: CaError) => e instanceof CaError && /spiffe:\/\/cluster\.local\/ns\/istio-system\/sa\/sleep may not impersonate spiffe:\/\/cluster\.local\/ns\/default\/sa\/httpbin/.test(e.message));
    } finally {
      mgr.stop();
      issuer.close();
    }
  });

  test('an unreachable CA fails the fetch; it works once the CA is back', async () => {
    await server.close();
    const cfg = cfgFor('ztunnel');
    const issuer = ztunnelIssuer(cfg, 2000);
    const mgr = new CertificateManager({ issue: issuer.issue, ttlSec: 3600 });
    try {
      await assert.rejects(mgr.get(id('default', 'late')), (e: CaError) => e instanceof CaError && /Deadline exceeded/i.test(e.message));
      server = await startCaServer({ ca, tokens, listen: `127.0.0.1:${port}`, trustedNodeAccounts: ['istio-system/ztunnel'] });
      const c = await mgr.get(id('default', 'late'));
      assert.equal(new X509Certificate(c.chainPem).subjectAltName, `URI:${id('default', 'late')}`);
    } finally {
      mgr.stop();
      issuer.close();
    }
  });
});
