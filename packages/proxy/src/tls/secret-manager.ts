/**
 * istio-agent's secret manager, in process: a P-256 key and a CSR for the
 * workload's SPIFFE id, the certificate from the CA (or from mounted files),
 * rotation at (1 − grace ratio ± jitter) of the lifetime, and the two secrets
 * istiod's transport sockets name — `default` (certificate + key) and `ROOTCA`
 * (trusted roots) — fed into the SecretStore as SDS would feed Envoy.
 */
import { existsSync, mkdirSync, readFileSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { logger } from '../core/log.ts';
import { createCertificate, type CaClientOptions, type CaCredential } from './ca-client.ts';
import { tlsCertificateSecret, validationSecret, type SecretStore } from './secrets.ts';
import { certFacts, makeCsr, newKeyPair, privateKeyPem, splitPem } from './x509.ts';

const log = logger('secret');

export const DEFAULT_SECRET = 'default';
export const ROOT_SECRET = 'ROOTCA';

export interface SecretManagerOptions {
  /** spiffe://<trust domain>/ns/<ns>/sa/<sa>. */
  readonly identity: string;
  /** Requested lifetime (SECRET_TTL). */
  readonly ttlSec: number;
  /** SECRET_GRACE_PERIOD_RATIO: rotate when this share of the lifetime is left. */
  readonly graceRatio: number;
  /** SECRET_GRACE_PERIOD_RATIO_JITTER: ± random share added to the ratio. */
  readonly graceJitter: number;
  /** Certificates from a CA (CA_ADDR) ... */
  readonly ca?: {
    readonly client: CaClientOptions;
    /** The projected token (read afresh for each request: kubelet rotates it). */
    readonly tokenFile?: string;
    /** PROV_CERT: cert-chain.pem + key.pem to authenticate with when there is no token. */
    readonly provCertDir?: string;
  };
  /** ... or from mounted files: cert-chain.pem, key.pem, root-cert.pem (FILE_MOUNTED_CERTS, /etc/certs). */
  readonly filesDir?: string;
  /** OUTPUT_CERTS: where each new key and chain is written in the same layout. */
  readonly outputDir?: string;
}

export interface IssuedIdentity {
  readonly chainPem: string;
  readonly keyPem: string;
  readonly rootPem: string;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly serial: string;
}

export class SecretManager {
  readonly options: SecretManagerOptions;
  private readonly store: SecretStore;
  private current: IssuedIdentity | undefined;
  private timer: NodeJS.Timeout | undefined;
  private watcher: FSWatcher | undefined;
  private stopped = false;
  private firstResolve: (() => void) | undefined;
  private readonly first: Promise<void>;
  /** Certificates installed so far (rotations + 1). */
  issued = 0;

  constructor(options: SecretManagerOptions, store: SecretStore) {
    if (!options.ca && !options.filesDir) throw new Error('secret manager: neither a CA nor a certificate directory is configured');
    this.options = options;
    this.store = store;
    this.first = new Promise((resolve) => { this.firstResolve = resolve; });
  }

  /** Starts fetching; resolves once `default` and `ROOTCA` are in the store (retrying until then). */
  start(): Promise<void> {
    if (this.options.filesDir) this.watchFiles(this.options.filesDir);
    else void this.rotate(0);
    return this.first;
  }

  get identity(): IssuedIdentity | undefined { return this.current; }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.watcher?.close();
  }

  private async rotate(attempt: number): Promise<void> {
    if (this.stopped) return;
    try {
      this.install(await this.fetchFromCa());
      this.schedule(this.rotationDelay());
    } catch (err) {
      // Backoff up to 10 s, but never past the current certificate's rotation point by much.
      const delay = Math.min(10_000, 200 * 2 ** Math.min(attempt, 6));
      log.warn(`secret manager: certificate for ${this.options.identity} not issued (${(err as Error).message}); retrying in ${delay} ms`);
      this.schedule(delay, attempt + 1);
    }
  }

  private schedule(ms: number, attempt = 0): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.rotate(attempt), Math.max(0, ms));
    this.timer.unref();
  }

  /** istio-agent's rotation time: expiry − (ratio ± jitter) × lifetime. */
  rotationDelay(now = Date.now()): number {
    const c = this.current;
    if (!c) return 0;
    const o = this.options;
    const jitter = o.graceJitter > 0 ? (Math.random() * 2 - 1) * o.graceJitter : 0;
    const grace = Math.min(1, Math.max(0, o.graceRatio + jitter)) * (c.notAfter - c.notBefore);
    return c.notAfter - grace - now;
  }

  private async fetchFromCa(): Promise<IssuedIdentity> {
    const ca = this.options.ca!;
    const keys = await newKeyPair();
    const csr = await makeCsr(keys, this.options.identity);
    const chain = await createCertificate(ca.client, csr, this.options.ttlSec, this.credential());
    const keyPem = await privateKeyPem(keys.privateKey);
    const certs = chain.flatMap((c) => splitPem(c));
    const root = certs.length > 1 ? certs[certs.length - 1] : ca.client.rootCertPem ?? '';
    const presented = certs.length > 1 ? certs.slice(0, -1) : certs;
    const facts = certFacts(presented[0]);
    if (!facts.uris.includes(this.options.identity)) throw new Error(`the CA issued ${facts.uris.join(', ') || 'no URI SAN'}, not ${this.options.identity}`);
    return { chainPem: presented.join(''), keyPem, rootPem: root, notBefore: facts.notBefore, notAfter: facts.notAfter, serial: facts.serial };
  }

  /** The token if there is one; else a still-valid current certificate; else PROV_CERT. */
  private credential(): CaCredential {
    const ca = this.options.ca!;
    if (ca.tokenFile && existsSync(ca.tokenFile)) return { token: readFileSync(ca.tokenFile, 'utf8').trim() };
    const c = this.current;
    if (c && c.notAfter > Date.now()) return { clientCert: { chainPem: c.chainPem, keyPem: c.keyPem } };
    if (ca.provCertDir && existsSync(join(ca.provCertDir, 'cert-chain.pem'))) {
      return { clientCert: { chainPem: readFileSync(join(ca.provCertDir, 'cert-chain.pem'), 'utf8'), keyPem: readFileSync(join(ca.provCertDir, 'key.pem'), 'utf8') } };
    }
    return {};
  }

  private install(id: IssuedIdentity): void {
    const rootChanged = this.current?.rootPem !== id.rootPem;
    this.current = id;
    this.issued++;
    this.store.update(DEFAULT_SECRET, tlsCertificateSecret(DEFAULT_SECRET, id.chainPem, id.keyPem));
    // Contexts rebuild per secret version: leave ROOTCA alone when the root did not change.
    if (rootChanged) this.store.update(ROOT_SECRET, validationSecret(ROOT_SECRET, id.rootPem));
    const out = this.options.outputDir;
    if (out) {
      mkdirSync(out, { recursive: true });
      writeFileSync(join(out, 'key.pem'), id.keyPem, { mode: 0o600 });
      writeFileSync(join(out, 'cert-chain.pem'), id.chainPem);
      writeFileSync(join(out, 'root-cert.pem'), id.rootPem);
    }
    log.info(`secret manager: installed certificate ${id.serial} for ${this.options.identity}, valid until ${new Date(id.notAfter).toISOString()}`);
    this.firstResolve?.();
    this.firstResolve = undefined;
  }

  /** Mounted certificates: load now, reload (debounced) when the directory changes. */
  private watchFiles(dir: string): void {
    const load = (): void => {
      try {
        const chainPem = readFileSync(join(dir, 'cert-chain.pem'), 'utf8');
        const keyPem = readFileSync(join(dir, 'key.pem'), 'utf8');
        const rootPem = readFileSync(join(dir, 'root-cert.pem'), 'utf8');
        const facts = certFacts(chainPem);
        // Files are replaced one by one: a key that does not match yet waits for the next change.
        if (!new X509Certificate(chainPem).checkPrivateKey(createPrivateKey(keyPem))) {
          log.debug(`secret manager: ${dir}: key.pem does not match cert-chain.pem (yet)`);
          return;
        }
        if (this.current?.serial === facts.serial && this.current.keyPem === keyPem && this.current.rootPem === rootPem) return;
        this.install({ chainPem, keyPem, rootPem, notBefore: facts.notBefore, notAfter: facts.notAfter, serial: facts.serial });
      } catch (err) {
        log.warn(`secret manager: cannot load certificates from ${dir}: ${(err as Error).message}`);
      }
    };
    load();
    let debounce: NodeJS.Timeout | undefined;
    try {
      this.watcher = watch(dir, () => {
        if (debounce) clearTimeout(debounce);
        debounce = setTimeout(load, 100);
      });
      this.watcher.unref();
    } catch (err) {
      log.warn(`secret manager: cannot watch ${dir}: ${(err as Error).message}`);
    }
  }
}
