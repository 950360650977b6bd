// The CA's issuing rules: chain order (leaf first, root last), lifetime (default,
// requested, max), the CSR's SPIFFE id against the caller's, a persisted generated
// root, and istio's plugged-in `cacerts` layout (made here with the openssl CLI).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { X509Certificate } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CertificateAuthority, IssueError } from '../src/ca/authority.ts';
import { TokenAuthority, TokenError } from '../src/ca/token.ts';
import { makeCsr, newKeyPair } from '@skua/proxy/identity';

const ID = 'spiffe://cluster.local/ns/default/sa/productpage';

async function csrFor(uri: string): Promise<string> {
  return makeCsr(await newKeyPair(), uri);
}

function tmp(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'skua-ca-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

test('a generated root signs a leaf for the caller; the chain is leaf then root', async () => {
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const chain = await ca.issue(await csrFor(ID), ID, 0);
  assert.equal(chain.length, 2);
  const leaf = new X509Certificate(chain[0]), root = new X509Certificate(chain[1]);
  assert.ok(leaf.checkIssued(root) && leaf.verify(root.publicKey), 'leaf is signed by the root');
  assert.ok(root.ca && !leaf.ca);
  assert.equal(leaf.subjectAltName, `URI:${ID}`);
  assert.match(root.subject, /O=cluster.local/);
  assert.equal(chain[1], ca.rootCertPem);
  // Default lifetime: istio's 24 h.
  assert.equal((Date.parse(leaf.validTo) - Date.parse(leaf.validFrom)) / 1000, 24 * 3600);
  assert.deepEqual(leaf.keyUsage?.sort(), ['1.3.6.1.5.5.7.3.1', '1.3.6.1.5.5.7.3.2']);
});

test('the requested TTL is honoured up to the max; beyond it the request is invalid', async () => {
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', defaultTtlSec: 600, maxTtlSec: 3600 });
  const short = new X509Certificate((await ca.issue(await csrFor(ID), ID, 5))[0]);
  assert.equal((Date.parse(short.validTo) - Date.parse(short.validFrom)) / 1000, 5);
  const dflt = new X509Certificate((await ca.issue(await csrFor(ID), ID, 0))[0]);
  assert.equal((Date.parse(dflt.validTo) - Date.parse(dflt.validFrom)) / 1000, 600);
  await assert.rejects(ca.issue(await csrFor(ID), ID, 7200), (e: IssueError) => e.kind === 'invalid' && /7200s is greater than the max allowed TTL 3600s/.test(e.message));
});

test('a CSR for another identity is denied naming both; a broken or unsigned CSR is invalid', async () => {
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const other = 'spiffe://cluster.local/ns/default/sa/reviews';
  await assert.rejects(ca.issue(await csrFor(other), ID, 0), (e: IssueError) => e.kind === 'denied' && e.message.includes(other) && e.message.includes(ID));
  await assert.rejects(ca.issue('not a csr', ID, 0), (e: IssueError) => e.kind === 'invalid');
  // Flip a byte inside the signature: parses, but does not verify.
  const good = await csrFor(ID);
  const b64 = good.split('\n').filter((l) => l && !l.startsWith('-----')).join('');
  const der = Buffer.from(b64, 'base64');
  der[der.length - 5] ^= 0xff;
  const bad = `-----BEGIN CERTIFICATE REQUEST-----\n${der.toString('base64')}\n-----END CERTIFICATE REQUEST-----\n`;
  await assert.rejects(ca.issue(bad, ID, 0), (e: IssueError) => e.kind === 'invalid' && /signature/.test(e.message));
  const noSan = execFileSync('openssl', ['req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', '/dev/null', '-subj', '/CN=x'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] });
  await assert.rejects(ca.issue(noSan, ID, 0), (e: IssueError) => e.kind === 'invalid' && /no URI SAN/.test(e.message));
});

test('a generated root is persisted and reused from the state directory', async (t) => {
  const dir = tmp(t);
  const a = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: dir });
  const b = await CertificateAuthority.create({ trustDomain: 'cluster.local', stateDir: dir });
  assert.equal(a.rootCertPem, b.rootCertPem);
  assert.equal(readFileSync(join(dir, 'root-cert.pem'), 'utf8'), a.rootCertPem);
  const leaf = new X509Certificate((await b.issue(await csrFor(ID), ID, 60))[0]);
  assert.ok(leaf.verify(new X509Certificate(a.rootCertPem).publicKey));
});

test("istio's cacerts layout (RSA root, EC intermediate): chain is leaf, intermediate, root and verifies with openssl", async (t) => {
  const dir = tmp(t);
  const ssl = (...args: string[]): void => { execFileSync('openssl', args, { cwd: dir, stdio: 'pipe' }); };
  ssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'root-key.pem', '-out', 'root-cert.pem', '-days', '30', '-subj', '/O=Istio/CN=Root CA',
    '-addext', 'basicConstraints=critical,CA:true', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  ssl('req', '-new', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes', '-keyout', 'ca-key.pem', '-out', 'ca.csr', '-subj', '/O=Istio/CN=Intermediate CA');
  writeFileSync(join(dir, 'ext.cnf'), 'basicConstraints=critical,CA:true\nkeyUsage=critical,keyCertSign,cRLSign,digitalSignature\n');
  ssl('x509', '-req', '-in', 'ca.csr', '-CA', 'root-cert.pem', '-CAkey', 'root-key.pem', '-CAcreateserial', '-out', 'ca-cert.pem', '-days', '20', '-extfile', 'ext.cnf');
  writeFileSync(join(dir, 'cert-chain.pem'), readFileSync(join(dir, 'ca-cert.pem'), 'utf8') + readFileSync(join(dir, 'root-cert.pem'), 'utf8'));
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local', cacertsDir: dir });
  const chain = await ca.issue(await csrFor(ID), ID, 3600);
  assert.equal(chain.length, 3);
  assert.equal(new X509Certificate(chain[1]).subject.includes('Intermediate CA'), true);
  assert.equal(new X509Certificate(chain[2]).subject.includes('Root CA'), true);
  writeFileSync(join(dir, 'leaf.pem'), chain[0]);
  writeFileSync(join(dir, 'untrusted.pem'), chain[1]);
  const out = execFileSync('openssl', ['verify', '-CAfile', 'root-cert.pem', '-untrusted', 'untrusted.pem', 'leaf.pem'], { cwd: dir, encoding: 'utf8' });
  assert.match(out, /leaf.pem: OK/);
  // A key that does not belong to ca-cert.pem is refused at load time.
  ssl('genpkey', '-algorithm', 'EC', '-pkeyopt', 'ec_paramgen_curve:P-256', '-out', 'ca-key.pem');
  await assert.rejects(CertificateAuthority.create({ trustDomain: 'cluster.local', cacertsDir: dir }), /does not match/);
});

test('tokens: the signed service account verifies; tampered, expired, wrong-key tokens do not', (t) => {
  const dir = tmp(t);
  const tokens = TokenAuthority.create(dir);
  const tok = tokens.issue({ namespace: 'default', serviceAccount: 'productpage' });
  assert.deepEqual(tokens.verify(tok), { namespace: 'default', serviceAccount: 'productpage' });
  const claims = JSON.parse(Buffer.from(tok.split('.')[1], 'base64url').toString()) as { sub: string; aud: string[] };
  assert.equal(claims.sub, 'system:serviceaccount:default:productpage');
  assert.deepEqual(claims.aud, ['istio-ca']);
  // Same key after a restart (persisted); another key rejects.
  assert.deepEqual(TokenAuthority.create(dir).verify(tok), { namespace: 'default', serviceAccount: 'productpage' });
  assert.throws(() => TokenAuthority.create().verify(tok), TokenError);
  const [h, , s] = tok.split('.');
  const forged = `${h}.${Buffer.from(JSON.stringify({ ...claims, sub: 'system:serviceaccount:default:admin' })).toString('base64url')}.${s}`;
  assert.throws(() => tokens.verify(forged), /signature/);
  const old = tokens.issue({ namespace: 'default', serviceAccount: 'productpage' }, 60, Math.floor(Date.now() / 1000) - 3600);
  assert.throws(() => tokens.verify(old), /expired/);
});
