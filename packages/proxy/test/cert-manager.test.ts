// The certificate manager against skua-controlplane's real CA (gRPC over TLS, a Bearer token per
// service account): many SPIFFE identities in one process, each fetched on first use and cached,
// concurrent callers sharing one CSR, at most N CSRs with the CA at once, renewal at half-life of
// a short-lived certificate, renewal failures retried while the old certificate serves, errors
// reported to the caller, forget() ending renewals.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { CertificateManager, caIssuer, type CertificateIssuer, type WorkloadCertificate } from '../src/tls/cert-manager.ts';
import { CaError, type CaClientOptions } from '../src/tls/ca-client.ts';
import { parseSpiffeUri } from '../src/tls/spiffe.ts';
import { CertificateAuthority } from '../../controlplane/src/ca/authority.ts';
import { startCaServer, type CaServer } from '../../controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../controlplane/src/ca/token.ts';

let ca: CertificateAuthority, tokens: TokenAuthority, server: CaServer, client: CaClientOptions;
const managers: CertificateManager[] = [];

before(async () => {
  ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  tokens = TokenAuthority.create();
  server = await startCaServer({ ca, tokens, listen: '127.0.0.1:0' });
  client = { address: `127.0.0.1:${server.port}`, rootCertPem: ca.rootCertPem, clusterId: 'Kubernetes' };
});
after(async () => { for (const m of managers) m.stop(); await server?.close(); });

const id = (sa: string, ns = 'default'): string => `spiffe://cluster.local/ns/${ns}/sa/${sa}`;

/** The real CA, proving each identity with its own service-account token; counts CSRs in flight at the CA. */
function realIssuer(): { issue: CertificateIssuer; calls: number; peak: number; failNext: number } {
  const real = caIssuer(client, (identity) => {
    const sa = parseSpiffeUri(identity);
    return { token: tokens.issue({ namespace: sa?.namespace ?? 'x', serviceAccount: sa?.serviceAccount ?? 'x' }) };
  });
  const stats = { calls: 0, peak: 0, failNext: 0, current: 0, issue: undefined as unknown as CertificateIssuer };
  stats.issue = async (identity, csr, ttl) => {
    stats.calls++;
    stats.current++;
    stats.peak = Math.max(stats.peak, stats.current);
    try {
      if (stats.failNext > 0) { stats.failNext--; throw new CaError(14, 'CA unavailable (test)'); }
      return await real(identity, csr, ttl);
    } finally {
      stats.current--;
    }
  };
  return stats;
}

function manager(o: Partial<ConstructorParameters<typeof CertificateManager>[0]> & { issue: CertificateIssuer }): CertificateManager {
  const m = new CertificateManager({ rootCertPem: ca.rootCertPem, ...o });
  managers.push(m);
  return m;
}

function check(c: WorkloadCertificate, identity: string): void {
  const leaf = new X509Certificate(c.chainPem);
  assert.equal(leaf.subjectAltName, `URI:${identity}`);
  assert.ok(leaf.verify(new X509Certificate(c.rootPem).publicKey), 'chains to the CA root');
  assert.ok(leaf.checkPrivateKey(createPrivateKey(c.keyPem)), 'the key matches');
}

describe('certificate manager', { timeout: 60_000 }, () => {
  test('many identities, fetched on first use, at most N CSRs with the CA at once', async () => {
    const issuer = realIssuer();
    const m = manager({ issue: issuer.issue, maxConcurrentCsrs: 3, ttlSec: 3600 });
    assert.equal(issuer.calls, 0, 'nothing is fetched before it is asked for');
    const ids = Array.from({ length: 20 }, (_, i) => id(`sa-${i}`, `ns-${i % 4}`));
    const before = server.counts.issued;
    const certs = await Promise.all(ids.map((i) => m.get(i)));
    certs.forEach((c, i) => check(c, ids[i]));
    assert.equal(server.counts.issued - before, 20, 'one certificate per identity from the real CA');
    assert.equal(issuer.peak, 3, 'never more than 3 CSRs with the CA, and the limit was reached');
    assert.ok(m.peakInFlight <= 3);
    assert.deepEqual(new Set(m.identities), new Set(ids));
    assert.equal(new Set(certs.map((c) => c.serial)).size, 20);
  });

  test('cached: the same certificate again, no CSR; concurrent first callers share one CSR', async () => {
    const issuer = realIssuer();
    const m = manager({ issue: issuer.issue, ttlSec: 3600 });
    const a = await m.get(id('cached'));
    assert.equal(await m.get(id('cached')), a);
    assert.equal(m.peek(id('cached')), a);
    assert.equal(issuer.calls, 1);
    const burst = await Promise.all(Array.from({ length: 10 }, () => m.get(id('burst'))));
    assert.equal(new Set(burst).size, 1, 'ten callers, one certificate');
    assert.equal(issuer.calls, 2, 'and one CSR');
    assert.equal(server.issuedTo.get(id('burst')), 1);
  });

  test('renewed at half-life of a short-lived certificate; get() then returns the new one', async () => {
    const issuer = realIssuer();
    const m = manager({ issue: issuer.issue, ttlSec: 2, jitter: 0 });
    const installed: Array<{ c: WorkloadCertificate; at: number }> = [];
    m.onCertificate((c) => installed.push({ c, at: Date.now() }));
    const first = await m.get(id('short'));
    assert.equal(first.notAfter - first.notBefore, 2000);
    assert.equal(m.renewalDelay(first, first.notBefore), 1000, 'half of the 2 s lifetime');
    await until(() => installed.length >= 2, 5000);
    const renewed = installed[1];
    assert.notEqual(renewed.c.serial, first.serial);
    const sinceIssue = renewed.at - first.notBefore;
    assert.ok(sinceIssue >= 900 && sinceIssue < 1900, `renewed ${sinceIssue} ms after notBefore (half-life 1000 ms)`);
    assert.equal(await m.get(id('short')), renewed.c);
    check(renewed.c, id('short'));
  });

  test('a failed renewal is retried with back-off while the old certificate serves', async () => {
    const issuer = realIssuer();
    const m = manager({ issue: issuer.issue, ttlSec: 3, jitter: 0, retryBaseMs: 50 });
    const first = await m.get(id('flaky'));
    issuer.failNext = 2;
    const renewed = await new Promise<WorkloadCertificate>((resolve) => m.onCertificate(resolve));
    assert.equal(issuer.calls, 4, 'first issue, two failures, the renewal');
    assert.notEqual(renewed.serial, first.serial);
    assert.ok(Date.now() < first.notAfter, 'renewed before the old certificate expired');
  });

  test("the CA's refusal reaches the caller; the identity is not cached and a later get asks again", async () => {
    // The token proves default/denied but the CSR names another trust domain: PERMISSION_DENIED.
    const m = manager({ issue: caIssuer(client, () => ({ token: tokens.issue({ namespace: 'default', serviceAccount: 'denied' }) })) });
    const other = 'spiffe://other.td/ns/default/sa/denied';
    await assert.rejects(m.get(other), (e: CaError) => e instanceof CaError && e.code === 7);
    assert.equal(m.peek(other), undefined);
    assert.deepEqual(m.identities, []);
    await assert.rejects(m.get(other), CaError);
  });

  test('forget() ends renewals; stop() refuses new work', async () => {
    const issuer = realIssuer();
    const m = manager({ issue: issuer.issue, ttlSec: 2, jitter: 0 });
    await m.get(id('gone'));
    m.forget(id('gone'));
    assert.equal(m.peek(id('gone')), undefined);
    await new Promise((r) => setTimeout(r, 1500));
    assert.equal(issuer.calls, 1, 'no renewal after forget');
    m.stop();
    await assert.rejects(m.get(id('gone')), /stopped/);
  });
});

async function until(cond: () => boolean, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (!cond()) {
    if (Date.now() > end) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 20));
  }
}
