/**
 * istio-agent's secret manager, in process: the workload's one SPIFFE identity from the
 * certificate manager (a CA; renewed at (1 − grace ratio ± jitter) of the lifetime) or from
 * mounted files, and the two secrets istiod's transport sockets name — `default` (certificate +
 * key) and `ROOTCA` (trusted roots) — fed into a SecretStore as SDS would feed Envoy.
 */
import { existsSync, mkdirSync, readFileSync, watch, writeFileSync, type FSWatcher } from 'node:fs';
import { join } from 'node:path';
import { createPrivateKey, X509Certificate } from 'node:crypto';
import { logger } from '../core/log.ts';
import { createCertificate, type CaClientOptions, type CaCredential } from './ca-client.ts';
import { tlsCertificateSecret, validationSecret, type SecretStore } from './secrets.ts';
import { certFacts } from './x509.ts';
import { CertificateManager, type WorkloadCertificate } from './cert-manager.ts';

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

export type IssuedIdentity = WorkloadCertificate;

export class SecretManager {
  readonly options: SecretManagerOptions;
  private readonly store: SecretStore;
  private current: IssuedIdentity | undefined;
  private timer: NodeJS.Timeout | undefined;
  private watcher: FSWatcher | undefined;
  /** The CA path: one identity in a certificate manager, which renews it. */
  private readonly certs: CertificateManager | undefined;
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
    const ca = options.ca;
    if (ca && !options.filesDir) {
      this.certs = new CertificateManager({
        issue: (_identity, csr, ttl) => createCertificate(ca.client, csr, ttl, this.credential()),
        ttlSec: options.ttlSec, rotateAt: 1 - options.graceRatio, jitter: options.graceJitter, maxConcurrentCsrs: 1,
        rootCertPem: ca.client.rootCertPem,
      });
      this.certs.onCertificate((c) => this.install(c));
    }
  }

  /** Starts fetching; resolves once `default` and `ROOTCA` are in the store (retrying until then). */
  start(): Promise<void> {
    if (this.options.filesDir) this.watchFiles(this.options.filesDir);
    else void this.fetchFirst(0);
    return this.first;
  }

  get identity(): IssuedIdentity | undefined { return this.current; }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.watcher?.close();
    this.certs?.stop();
  }

  /** The first certificate, retried with back-off until issued (the certificate manager renews it after). */
  private async fetchFirst(attempt: number): Promise<void> {
    if (this.stopped || !this.certs) return;
    try {
      await this.certs.get(this.options.identity);
    } catch (err) {
      if (this.stopped) return;
      const delay = Math.min(10_000, 200 * 2 ** Math.min(attempt, 6));
      log.warn(`secret manager: certificate for ${this.options.identity} not issued (${(err as Error).message}); retrying in ${delay} ms`);
      if (this.timer) clearTimeout(this.timer);
      this.timer = setTimeout(() => void this.fetchFirst(attempt + 1), delay);
      this.timer.unref();
    }
  }

  /** istio-agent's rotation time: expiry − (ratio ± jitter) × lifetime. */
  rotationDelay(now = Date.now()): number {
    const c = this.current;
    return c && this.certs ? this.certs.renewalDelay(c, now) : 0;
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
        this.install({ identity: this.options.identity, chainPem, keyPem, rootPem, notBefore: facts.notBefore, notAfter: facts.notAfter, serial: facts.serial });
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
