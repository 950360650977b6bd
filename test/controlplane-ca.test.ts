// skua-controlplane as the mesh CA: a real process serving IstioCertificateService over TLS next to
// ADS; its `token` subcommand mints the credential the CA accepts; a CSR for the token's identity
// gets a chain (leaf first, root last), a CSR for another identity is refused. With --ca-address
// and no source it runs the CA alone (no ADS), so a test can take the CA down apart from WDS.
import { after, before, describe, test } from 'node:test';
import { once } from 'node:events';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { X509Certificate } from 'node:crypto';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createCertificate, CaError, makeCsr, newKeyPair } from '../packages/proxy/src/api/identity.ts';
import { controlPlaneMain } from './lib/controlplane.ts';
import { freePort, repoRoot } from './lib/proxy.ts';
import { run } from './lib/client.ts';

const ID = 'spiffe://cluster.local/ns/default/sa/reviews';

describe('skua-controlplane --ca-address', () => {
  let dir: string, child: ChildProcess | undefined, caPort: number, log = '';
  before(async () => {
    dir = mkdtempSync(path.join(tmpdir(), 'skua-cp-ca-'));
    caPort = await freePort();
    const xdsPort = await freePort();
    child = spawn(process.execPath, [controlPlaneMain, '--config-dir', dir, '--xds-address', `127.0.0.1:${xdsPort}`,
      '--ca-address', `127.0.0.1:${caPort}`, '--state-dir', path.join(dir, 'ca')], { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
    child.stderr?.setEncoding('utf8');
    child.stderr?.on('data', (d: string) => { log += d; });
    const deadline = Date.now() + 20_000;
    while (!log.includes(`CA for cluster.local on 127.0.0.1:${caPort}`)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`control plane did not start its CA: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  });
  after(() => { if (child && child.exitCode === null) child.kill('SIGKILL'); rmSync(dir, { recursive: true, force: true }); });

  test('a token from `skua-controlplane token` gets a certificate for its own identity only', async () => {
    const tok = await run(process.execPath, [controlPlaneMain, 'token', '--state-dir', path.join(dir, 'ca'), '--namespace', 'default', '--service-account', 'reviews']);
    assert.equal(tok.code, 0, tok.stderr);
    const token = tok.stdout.trim();
    const root = readFileSync(path.join(dir, 'ca', 'root-cert.pem'), 'utf8');
    const ca = { address: `127.0.0.1:${caPort}`, rootCertPem: root, clusterId: 'Kubernetes' };
    const keys = await newKeyPair();
    const chain = await createCertificate(ca, await makeCsr(keys, ID), 3600, { token });
    assert.ok(chain.length >= 2);
    const leaf = new X509Certificate(chain[0]);
    assert.match(leaf.subjectAltName ?? '', new RegExp(`URI:${ID}`));
    assert.equal(new X509Certificate(chain.at(-1)!).fingerprint256, new X509Certificate(root).fingerprint256, 'root last');
    await assert.rejects(createCertificate(ca, await makeCsr(keys, 'spiffe://cluster.local/ns/default/sa/ratings'), 3600, { token }),
      (e: unknown) => e instanceof CaError && e.code === 7 && /ratings/.test(e.message) && /reviews/.test(e.message));
  });
});

test('--ca-address with no source: the CA alone, no ADS listener; SIGTERM exits 0', async () => {
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-cp-ca-only-'));
  const caPort = await freePort();
  const child = spawn(process.execPath, [controlPlaneMain, '--ca-address', `127.0.0.1:${caPort}`, '--state-dir', path.join(dir, 'ca')],
    { cwd: repoRoot, stdio: ['ignore', 'ignore', 'pipe'] });
  let log = '';
  child.stderr.setEncoding('utf8').on('data', (d: string) => { log += d; });
  try {
    const deadline = Date.now() + 20_000;
    while (!log.includes(`CA for cluster.local on 127.0.0.1:${caPort}`)) {
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`no CA: ${log}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    assert.doesNotMatch(log, /ADS on/);
    const tok = await run(process.execPath, [controlPlaneMain, 'token', '--state-dir', path.join(dir, 'ca'), '--namespace', 'default', '--service-account', 'reviews']);
    const ca = { address: `127.0.0.1:${caPort}`, rootCertPem: readFileSync(path.join(dir, 'ca', 'root-cert.pem'), 'utf8'), clusterId: 'Kubernetes' };
    const chain = await createCertificate(ca, await makeCsr(await newKeyPair(), ID), 3600, { token: tok.stdout.trim() });
    assert.match(new X509Certificate(chain[0]).subjectAltName ?? '', new RegExp(`URI:${ID}`));
    child.kill('SIGTERM');
    const [code] = await once(child, 'exit') as [number | null];
    assert.equal(code, 0, log);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
});
