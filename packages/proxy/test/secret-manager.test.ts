// The secret manager on its own: pilot-agent's environment parsed into options,
// certificates from the CA (gRPC, token) fed to a SecretStore as `default`/`ROOTCA`,
// rotation at about half the lifetime, OUTPUT_CERTS written, mounted certificates
// (FILE_MOUNTED_CERTS) loaded and reloaded when the files change.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { X509Certificate } from 'node:crypto';
import { EnvError, parseGoDuration, secretManagerOptionsFromEnv } from '../src/tls/identity-env.ts';
import { SecretManager } from '../src/tls/secret-manager.ts';
import { SecretStore } from '../src/tls/secrets.ts';
import { makeCsr, newKeyPair, privateKeyPem } from '../src/tls/x509.ts';
import { CertificateAuthority } from '../../controlplane/src/ca/authority.ts';
import { startCaServer } from '../../controlplane/src/ca/server.ts';
import { TokenAuthority } from '../../controlplane/src/ca/token.ts';

function tmp(t: { after: (fn: () => void) => void }): string {
  const dir = mkdtempSync(join(tmpdir(), 'skua-sm-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  return dir;
}

async function until(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (!cond() && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
  return cond();
}

test("pilot-agent's environment: identity, TTL, grace ratio, paths relative to the working directory", (t) => {
  const dir = tmp(t);
  assert.equal(secretManagerOptionsFromEnv({}, dir), undefined);
  const o = secretManagerOptionsFromEnv({ CA_ADDR: 'istiod.istio-system.svc:15012', POD_NAMESPACE: 'shop', SERVICE_ACCOUNT: 'cart', SECRET_TTL: '1h30m', OUTPUT_CERTS: 'out' }, dir)!;
  assert.equal(o.identity, 'spiffe://cluster.local/ns/shop/sa/cart');
  assert.equal(o.ttlSec, 5400);
  assert.equal(o.graceRatio, 0.5);
  assert.equal(o.ca?.tokenFile, join(dir, 'var/run/secrets/tokens/istio-token'));
  assert.equal(o.outputDir, join(dir, 'out'));
  const f = secretManagerOptionsFromEnv({ FILE_MOUNTED_CERTS: 'true', TRUST_DOMAIN: 'example.org' }, dir)!;
  assert.equal(f.filesDir, join(dir, 'etc/certs'));
  assert.equal(f.identity, 'spiffe://example.org/ns/default/sa/default');
  assert.equal(parseGoDuration('500ms', 'x'), 0.5);
  assert.throws(() => secretManagerOptionsFromEnv({ CA_ADDR: 'x:1', SECRET_TTL: '10 minutes' }, dir), (e: EnvError) => /SECRET_TTL/.test(e.message));
  assert.throws(() => secretManagerOptionsFromEnv({ CA_ADDR: 'x:1', SECRET_GRACE_PERIOD_RATIO: '2' }, dir), /SECRET_GRACE_PERIOD_RATIO/);
});

test('from the CA: default and ROOTCA installed, rotated at about half the lifetime, written to OUTPUT_CERTS', { timeout: 30_000 }, async (t) => {
  const dir = tmp(t);
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const tokens = TokenAuthority.create();
  const server = await startCaServer({ ca, tokens, listen: '127.0.0.1:0' });
  t.after(() => server.close());
  mkdirSync(join(dir, 'var/run/secrets/tokens'), { recursive: true });
  mkdirSync(join(dir, 'var/run/secrets/istio'), { recursive: true });
  writeFileSync(join(dir, 'var/run/secrets/tokens/istio-token'), tokens.issue({ namespace: 'default', serviceAccount: 'cart' }));
  writeFileSync(join(dir, 'var/run/secrets/istio/root-cert.pem'), ca.rootCertPem);
  const options = secretManagerOptionsFromEnv({ CA_ADDR: `127.0.0.1:${server.port}`, SERVICE_ACCOUNT: 'cart', SECRET_TTL: '2s', OUTPUT_CERTS: 'out' }, dir)!;
  const store = new SecretStore();
  const changes: string[] = [];
  store.onChange((name) => changes.push(name));
  const sm = new SecretManager(options, store);
  t.after(() => sm.stop());
  await sm.start();
  assert.deepEqual(changes, ['default', 'ROOTCA']);
  const first = sm.identity!;
  assert.equal(first.notAfter - first.notBefore, 2000);
  const delay = sm.rotationDelay(first.notBefore);
  assert.ok(delay > 900 && delay < 1100, `rotation after ${delay} ms (half of 2 s, ±1% jitter)`);
  assert.equal(new X509Certificate(readFileSync(join(dir, 'out/cert-chain.pem'))).subjectAltName, 'URI:spiffe://cluster.local/ns/default/sa/cart');
  assert.equal(readFileSync(join(dir, 'out/root-cert.pem'), 'utf8'), ca.rootCertPem);
  assert.ok(await until(() => sm.issued >= 3, 5000), `rotated: ${sm.issued} certificates`);
  assert.notEqual(sm.identity!.serial, first.serial);
  // The root did not change: ROOTCA was sent once, default once per certificate.
  assert.equal(changes.filter((c) => c === 'ROOTCA').length, 1);
  assert.equal(readFileSync(join(dir, 'out/key.pem'), 'utf8'), sm.identity!.keyPem);
});

test('the root certificate file appearing after the agent started is used by the next request to the CA', { timeout: 30_000 }, async (t) => {
  const dir = tmp(t);
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const tokens = TokenAuthority.create();
  const server = await startCaServer({ ca, tokens, listen: '127.0.0.1:0' });
  t.after(() => server.close());
  mkdirSync(join(dir, 'var/run/secrets/tokens'), { recursive: true });
  mkdirSync(join(dir, 'var/run/secrets/istio'), { recursive: true });
  writeFileSync(join(dir, 'var/run/secrets/tokens/istio-token'), tokens.issue({ namespace: 'default', serviceAccount: 'cart' }));
  const options = secretManagerOptionsFromEnv({ CA_ADDR: `127.0.0.1:${server.port}`, SERVICE_ACCOUNT: 'cart' }, dir)!;
  const sm = new SecretManager(options, new SecretStore());
  t.after(() => sm.stop());
  const started = sm.start();
  // Without the file the CA's self-signed root is not trusted: nothing is issued yet.
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(sm.issued, 0);
  writeFileSync(join(dir, 'var/run/secrets/istio/root-cert.pem'), ca.rootCertPem);
  await started;
  assert.equal(new X509Certificate(sm.identity!.chainPem).subjectAltName, 'URI:spiffe://cluster.local/ns/default/sa/cart');
});

test('mounted certificates: loaded at start, reloaded when the files change', { timeout: 30_000 }, async (t) => {
  const dir = tmp(t);
  const certs = join(dir, 'etc/certs');
  mkdirSync(certs, { recursive: true });
  const ca = await CertificateAuthority.create({ trustDomain: 'cluster.local' });
  const write = async (): Promise<string> => {
    const keys = await newKeyPair();
    const uri = 'spiffe://cluster.local/ns/default/sa/default';
    const chain = await ca.issue(await makeCsr(keys, uri), uri, 3600);
    writeFileSync(join(certs, 'key.pem'), await privateKeyPem(keys.privateKey));
    writeFileSync(join(certs, 'cert-chain.pem'), chain[0]);
    writeFileSync(join(certs, 'root-cert.pem'), chain[1]);
    return new X509Certificate(chain[0]).serialNumber;
  };
  const serial1 = await write();
  const store = new SecretStore();
  const sm = new SecretManager(secretManagerOptionsFromEnv({ FILE_MOUNTED_CERTS: 'true' }, dir)!, store);
  t.after(() => sm.stop());
  await sm.start();
  assert.equal(sm.identity?.serial, serial1);
  assert.ok(store.get('default')?.tlsCertificate && store.get('ROOTCA')?.validation?.trustedCa);
  const serial2 = await write();
  assert.ok(await until(() => sm.identity?.serial === serial2, 5000), 'reloaded after the files changed');
});
