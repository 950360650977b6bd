// CreateCertificate over gRPC with TLS, called by the proxy's CA client (real grpc-js
// on both sides): a Bearer token or a valid client certificate proves the identity;
// another identity's CSR → PERMISSION_DENIED naming both ids; a bad CSR →
// INVALID_ARGUMENT; no or bad credentials → UNAUTHENTICATED; TTL and chain order.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { X509Certificate } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { CertificateAuthority } from '../src/ca/authority.ts';
import { startCaServer, type CaServer } from '../src/ca/server.ts';
import { TokenAuthority } from '../src/ca/token.ts';
import { CaError, createCertificate, type CaClientOptions, makeCsr, newKeyPair, privateKeyPem } from '@skua/proxy/identity';

const TD = 'cluster.local';
const ID = `spiffe://${TD}/ns/default/sa/productpage`;
const OTHER = `spiffe://${TD}/ns/default/sa/reviews`;

let ca: CertificateAuthority, tokens: TokenAuthority, server: CaServer, client: CaClientOptions;

before(async () => {
  ca = await CertificateAuthority.create({ trustDomain: TD, maxTtlSec: 48 * 3600 });
  tokens = TokenAuthority.create();
  server = await startCaServer({ ca, tokens, listen: '127.0.0.1:0' });
  client = { address: `127.0.0.1:${server.port}`, rootCertPem: ca.rootCertPem, clusterId: 'Kubernetes' };
});
after(() => server?.close());

async function keyAndCsr(uri: string): Promise<{ csr: string; keyPem: string }> {
  const keys = await newKeyPair();
  return { csr: await makeCsr(keys, uri), keyPem: await privateKeyPem(keys.privateKey) };
}

const tokenFor = (sa: string): string => tokens.issue({ namespace: 'default', serviceAccount: sa });

function rejectsWith(p: Promise<unknown>, code: grpc.status, re: RegExp): Promise<void> {
  return assert.rejects(p, (e: CaError) => {
    assert.ok(e instanceof CaError, String(e));
    assert.equal(e.code, code, `${grpc.status[e.code]}: ${e.message}`);
    assert.match(e.message, re);
    return true;
  });
}

describe('CreateCertificate', { timeout: 30_000 }, () => {
  test('a Bearer token for the CSR identity gets leaf + root with the requested TTL', async () => {
    const { csr } = await keyAndCsr(ID);
    const chain = await createCertificate(client, csr, 3600, { token: tokenFor('productpage') });
    assert.equal(chain.length, 2);
    const leaf = new X509Certificate(chain[0]), root = new X509Certificate(chain[chain.length - 1]);
    assert.equal(leaf.subjectAltName, `URI:${ID}`);
    assert.ok(leaf.verify(root.publicKey));
    assert.equal(chain[1], ca.rootCertPem, 'root last');
    assert.equal((Date.parse(leaf.validTo) - Date.parse(leaf.validFrom)) / 1000, 3600);
  });

  test("another identity's CSR is PERMISSION_DENIED, naming both ids", async () => {
    const { csr } = await keyAndCsr(OTHER);
    const before = server.counts.denied;
    await rejectsWith(createCertificate(client, csr, 3600, { token: tokenFor('productpage') }), grpc.status.PERMISSION_DENIED,
      new RegExp(`${OTHER}.*${ID}`));
    assert.equal(server.counts.denied, before + 1);
  });

  test('a malformed CSR is INVALID_ARGUMENT; a TTL over the max too', async () => {
    await rejectsWith(createCertificate(client, 'garbage', 3600, { token: tokenFor('productpage') }), grpc.status.INVALID_ARGUMENT, /CSR/);
    const { csr } = await keyAndCsr(ID);
    await rejectsWith(createCertificate(client, csr, 100 * 3600, { token: tokenFor('productpage') }), grpc.status.INVALID_ARGUMENT, /max allowed TTL/);
  });

  test('no credential, a forged token or a non-Bearer header is UNAUTHENTICATED', async () => {
    const { csr } = await keyAndCsr(ID);
    await rejectsWith(createCertificate(client, csr, 3600, {}), grpc.status.UNAUTHENTICATED, /no Bearer token/);
    const forged = TokenAuthority.create().issue({ namespace: 'default', serviceAccount: 'productpage' });
    await rejectsWith(createCertificate(client, csr, 3600, { token: forged }), grpc.status.UNAUTHENTICATED, /signature/);
  });

  test('renewal: the current certificate as TLS client certificate proves the identity; an expired one does not', async () => {
    const first = await keyAndCsr(ID);
    const chain = await createCertificate(client, first.csr, 3600, { token: tokenFor('productpage') });
    const cred = { clientCert: { chainPem: chain[0], keyPem: first.keyPem } };
    const renewed = await createCertificate(client, (await keyAndCsr(ID)).csr, 3600, cred);
    assert.equal(new X509Certificate(renewed[0]).subjectAltName, `URI:${ID}`);
    // The certificate proves only its own id.
    await rejectsWith(createCertificate(client, (await keyAndCsr(OTHER)).csr, 3600, cred), grpc.status.PERMISSION_DENIED, new RegExp(OTHER));
    const short = await keyAndCsr(ID);
    const shortChain = await createCertificate(client, short.csr, 1, { token: tokenFor('productpage') });
    await new Promise((r) => setTimeout(r, 2100));
    await rejectsWith(createCertificate(client, (await keyAndCsr(ID)).csr, 3600, { clientCert: { chainPem: shortChain[0], keyPem: short.keyPem } }),
      grpc.status.UNAUTHENTICATED, /no valid client certificate/);
  });

  test("a client that does not trust the CA's root cannot connect", async () => {
    const stranger = await CertificateAuthority.create({ trustDomain: TD });
    const { csr } = await keyAndCsr(ID);
    await rejectsWith(createCertificate({ ...client, rootCertPem: stranger.rootCertPem, timeoutMs: 3000 }, csr, 3600, { token: tokenFor('productpage') }),
      grpc.status.UNAVAILABLE, /./);
  });
});
