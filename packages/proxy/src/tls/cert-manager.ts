/**
 * Workload certificates for many SPIFFE identities in one process (ztunnel serves every pod on
 * its node; the sidecar is the one-identity case). An identity is fetched on first use (a P-256
 * key and a CSR per certificate), cached, and renewed at a share of its lifetime (half-life by
 * default, ± jitter so a node's identities do not renew together); at most `maxConcurrentCsrs`
 * requests are with the CA at once, first fetches ahead of renewals. No process-wide state.
 */
import { log } from '../core/log.ts';
import { createCertificate, type CaClientOptions, type CaCredential } from './ca-client.ts';
import { certFacts, makeCsr, newKeyPair, privateKeyPem, splitPem } from './x509.ts';

export interface WorkloadCertificate {
  readonly identity: string;
  /** The leaf and any intermediates (PEM), as presented in a handshake. */
  readonly chainPem: string;
  readonly keyPem: string;
  /** The trust root(s) (PEM). */
  readonly rootPem: string;
  readonly notBefore: number;
  readonly notAfter: number;
  readonly serial: string;
}

/** Issues a chain for a CSR (leaf first; the CA's root last, when it sends it). */
export type CertificateIssuer = (identity: string, csrPem: string, ttlSec: number) => Promise<string[]>;

export interface CertificateManagerOptions {
  readonly issue: CertificateIssuer;
  /** Requested lifetime; default 24 h. */
  readonly ttlSec?: number;
  /** Share of the lifetime after which to renew; default 0.5 (half-life). */
  readonly rotateAt?: number;
  /** ± share added to rotateAt per renewal; default 0.01. */
  readonly jitter?: number;
  /** CSRs with the CA at once; default 8. */
  readonly maxConcurrentCsrs?: number;
  /** Roots to trust when the CA does not append its own. */
  readonly rootCertPem?: string;
  /** Renewal retry back-off bounds (ms); defaults 200 and 10 000. */
  readonly retryBaseMs?: number;
  readonly retryMaxMs?: number;
}

/** Istio's CA (IstioCertificateService) as the issuer; `credentialFor` proves each identity. */
export function caIssuer(client: CaClientOptions, credentialFor: (identity: string) => CaCredential | Promise<CaCredential>): CertificateIssuer {
  return async (identity, csr, ttl) => createCertificate(client, csr, ttl, await credentialFor(identity));
}

interface Entry {
  readonly identity: string;
  cert: WorkloadCertificate | undefined;
  /** The first fetch, shared by every caller until it settles. */
  first: Promise<WorkloadCertificate> | undefined;
  timer: NodeJS.Timeout | undefined;
  failures: number;
}

export class CertificateManager {
  private readonly o: Required<Omit<CertificateManagerOptions, 'rootCertPem'>> & { rootCertPem: string | undefined };
  private readonly entries = new Map<string, Entry>();
  private readonly listeners = new Set<(c: WorkloadCertificate) => void>();
  /** Waiting for a CSR slot: first fetches, then renewals (each an array read from a head index). */
  private readonly waiting: [Array<() => void>, Array<() => void>] = [[], []];
  private readonly heads = [0, 0];
  private stopped = false;
  /** CSRs with the CA right now. */
  inFlight = 0;
  /** Most CSRs ever with the CA at once (tests, metrics). */
  peakInFlight = 0;
  /** Certificates installed (first issues + renewals). */
  issued = 0;

  constructor(o: CertificateManagerOptions) {
    this.o = {
      issue: o.issue, ttlSec: o.ttlSec ?? 24 * 3600, rotateAt: o.rotateAt ?? 0.5, jitter: o.jitter ?? 0.01,
      maxConcurrentCsrs: Math.max(1, o.maxConcurrentCsrs ?? 8), rootCertPem: o.rootCertPem,
      retryBaseMs: o.retryBaseMs ?? 200, retryMaxMs: o.retryMaxMs ?? 10_000,
    };
  }

  /** The certificate for `identity`: cached, else fetched now (concurrent callers share one CSR). Rejects on a CA error. */
  get(identity: string): Promise<WorkloadCertificate> {
    if (this.stopped) return Promise.reject(new Error('certificate manager stopped'));
    let e = this.entries.get(identity);
    if (e?.cert && e.cert.notAfter > Date.now()) return Promise.resolve(e.cert);
    if (!e) {
      e = { identity, cert: undefined, first: undefined, timer: undefined, failures: 0 };
      this.entries.set(identity, e);
    }
    if (e.first) return e.first;
    const entry = e;
    const first = this.fetch(entry, 0).then((c) => { entry.first = undefined; return c; }, (err: unknown) => {
      entry.first = undefined;
      if (!entry.cert && this.entries.get(identity) === entry) this.entries.delete(identity);
      throw err;
    });
    entry.first = first;
    return first;
  }

  /** The cached certificate, if any (no fetch). */
  peek(identity: string): WorkloadCertificate | undefined {
    return this.entries.get(identity)?.cert;
  }

  /** The identities with a cached certificate. */
  get identities(): string[] {
    return [...this.entries.values()].filter((e) => e.cert).map((e) => e.identity);
  }

  /** Stop renewing `identity` and drop its certificate (its workload left). */
  forget(identity: string): void {
    const e = this.entries.get(identity);
    if (!e) return;
    if (e.timer) clearTimeout(e.timer);
    this.entries.delete(identity);
  }

  /** Called after every install (first issue and each renewal); returns the unsubscribe function. */
  onCertificate(listener: (c: WorkloadCertificate) => void): () => void {
    this.listeners.add(listener);
    return () => { this.listeners.delete(listener); };
  }

  stop(): void {
    this.stopped = true;
    for (const e of this.entries.values()) if (e.timer) clearTimeout(e.timer);
    this.entries.clear();
    // Anyone waiting for a slot goes ahead and finds the manager stopped.
    for (let p = 0; p < 2; p++) for (let i = this.heads[p]; i < this.waiting[p].length; i++) this.waiting[p][i]();
  }

  /** When to renew `c`: notBefore + (rotateAt ± jitter) × lifetime, as a delay from `now`. */
  renewalDelay(c: WorkloadCertificate, now = Date.now()): number {
    const jitter = this.o.jitter > 0 ? (Math.random() * 2 - 1) * this.o.jitter : 0;
    const share = Math.min(1, Math.max(0, this.o.rotateAt + jitter));
    return c.notBefore + share * (c.notAfter - c.notBefore) - now;
  }

  private async fetch(e: Entry, priority: 0 | 1): Promise<WorkloadCertificate> {
    await this.slot(priority);
    try {
      if (this.stopped || this.entries.get(e.identity) !== e) throw new Error(`certificate for ${e.identity} no longer wanted`);
      const cert = await this.request(e.identity);
      if (this.entries.get(e.identity) === e && !this.stopped) this.install(e, cert);
      return cert;
    } finally {
      this.release();
    }
  }

  private async request(identity: string): Promise<WorkloadCertificate> {
    const keys = await newKeyPair();
    const csr = await makeCsr(keys, identity);
    const chain = (await this.o.issue(identity, csr, this.o.ttlSec)).flatMap((c) => splitPem(c));
    if (chain.length === 0) throw new Error(`the CA returned no certificate for ${identity}`);
    const presented = chain.length > 1 ? chain.slice(0, -1) : chain;
    const rootPem = chain.length > 1 ? chain[chain.length - 1] : this.o.rootCertPem ?? '';
    const facts = certFacts(presented[0]);
    if (!facts.uris.includes(identity)) throw new Error(`the CA issued ${facts.uris.join(', ') || 'no URI SAN'}, not ${identity}`);
    return { identity, chainPem: presented.join(''), keyPem: await privateKeyPem(keys.privateKey), rootPem, notBefore: facts.notBefore, notAfter: facts.notAfter, serial: facts.serial };
  }

  private install(e: Entry, cert: WorkloadCertificate): void {
    e.cert = cert;
    e.failures = 0;
    this.issued++;
    this.schedule(e, this.renewalDelay(cert));
    for (const l of this.listeners) l(cert);
  }

  private schedule(e: Entry, ms: number): void {
    if (e.timer) clearTimeout(e.timer);
    e.timer = setTimeout(() => this.renew(e), Math.max(0, ms));
    e.timer.unref();
  }

  /** A renewal that fails retries with back-off while the current certificate still serves. */
  private renew(e: Entry): void {
    e.timer = undefined;
    if (this.stopped || this.entries.get(e.identity) !== e) return;
    this.fetch(e, 1).catch((err: unknown) => {
      if (this.stopped || this.entries.get(e.identity) !== e) return;
      const delay = Math.min(this.o.retryMaxMs, this.o.retryBaseMs * 2 ** Math.min(e.failures++, 10));
      log.warn(`certificate manager: renewing ${e.identity} failed (${(err as Error).message}); retrying in ${delay} ms`);
      this.schedule(e, delay);
    });
  }

  private slot(priority: 0 | 1): Promise<void> {
    if (this.inFlight < this.o.maxConcurrentCsrs) {
      this.inFlight++;
      if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting[priority].push(() => {
      this.inFlight++;
      if (this.inFlight > this.peakInFlight) this.peakInFlight = this.inFlight;
      resolve();
    }));
  }

  private release(): void {
    this.inFlight--;
    for (let p = 0; p < 2; p++) {
      const q = this.waiting[p];
      if (this.heads[p] < q.length) {
        const next = q[this.heads[p]++];
        if (this.heads[p] === q.length) { q.length = 0; this.heads[p] = 0; }
        next();
        return;
      }
    }
  }
}
