// The CSR the data plane sends its CA (PKCS#10 written by hand in tls/x509.ts), read by an independent
// parser: openssl verifies its self-signature and shows what istiod's CA reads from it — no subject,
// a P-256 key, the SPIFFE id as the one URI SAN, ecdsa-with-SHA256.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { makeCsr, newKeyPair, privateKeyPem } from '../src/tls/x509.ts';
import { createPrivateKey, createPublicKey, webcrypto } from 'node:crypto';

const URI = 'spiffe://cluster.local/ns/default/sa/sleep';

test('openssl verifies the CSR and reads an empty subject, a P-256 key and the SPIFFE URI SAN', async () => {
  const keys = await newKeyPair();
  const csr = await makeCsr(keys, URI);
  const text = execFileSync('openssl', ['req', '-noout', '-verify', '-text'], { input: csr, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
  assert.match(text, /Subject: *\n/);
  assert.match(text, /NIST CURVE: P-256/);
  assert.match(text, /X509v3 Subject Alternative Name: *\n\s*URI:spiffe:\/\/cluster\.local\/ns\/default\/sa\/sleep\n/);
  assert.match(text, /Signature Algorithm: ecdsa-with-SHA256/);
  const verified = execFileSync('openssl', ['req', '-noout', '-verify'], { input: csr, encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
  assert.equal(verified, '');
  // The key in the CSR is the pair's public key, and the private key PEM belongs to it.
  const pub = execFileSync('openssl', ['req', '-noout', '-pubkey'], { input: csr, encoding: 'utf8' });
  const spki = Buffer.from(await webcrypto.subtle.exportKey('spki', keys.publicKey));
  assert.deepEqual(createPublicKey(pub).export({ type: 'spki', format: 'der' }), spki);
  assert.deepEqual(createPublicKey(createPrivateKey(await privateKeyPem(keys.privateKey))).export({ type: 'spki', format: 'der' }), spki);
});

test('a long URI (length bytes past 127 and 255) still parses', async () => {
  const long = `spiffe://cluster.local/ns/${'n'.repeat(200)}/sa/${'s'.repeat(100)}`;
  const text = execFileSync('openssl', ['req', '-noout', '-verify', '-text'], { input: await makeCsr(await newKeyPair(), long), encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe'] });
  assert.ok(text.includes(`URI:${long}\n`));
});
