/**
 * The NDS name table (istio.networking.nds.v1.NameTable) as the DNS proxy answers from it,
 * built once per update: every host under the names a client may ask for (Kubernetes
 * services also as `name.ns.`, `name.ns.svc.` and, in the proxy's namespace, `name.`), plus a
 * CNAME for each of those with the first search domain appended (what a resolver tries
 * first), and `*.` wildcards. A known host always gets an authoritative NOERROR, even when it
 * has no record of the asked type (NXDOMAIN for AAAA would make clients drop the A answer).
 */
import { isIP } from 'node:net';
import { TYPE, type Answer } from './wire.ts';

/** Istio keeps these short so clients follow changes. */
export const ANSWER_TTL = 30;

export interface NameInfo {
  readonly ips: readonly string[];
  readonly registry: string;
  readonly shortname: string;
  readonly namespace: string;
  readonly altHosts: readonly string[];
}

/** Where the proxy sits: its namespace and cluster domain (`svc.cluster.local`), and resolv.conf's search list. */
export interface TableContext {
  readonly proxyNamespace: string;
  /** The proxy's DNS domain (`<ns>.svc.cluster.local` as pilot-agent's --domain); the namespace part is dropped. */
  readonly proxyDomain: string;
  readonly searchDomains: readonly string[];
}

export interface Lookup {
  readonly found: boolean;
  readonly answers: readonly Answer[];
}

const NOT_FOUND: Lookup = { found: false, answers: [] };

/** An IP address's network-order bytes (4 or 16). */
export function ipBytes(ip: string): Buffer {
  if (isIP(ip) === 4) return Buffer.from(ip.split('.').map(Number));
  let text = ip;
  const tail: number[] = [];
  const dotted = /:(\d+\.\d+\.\d+\.\d+)$/.exec(text);
  if (dotted) { tail.push(...ipBytes(dotted[1])); text = text.slice(0, dotted.index + 1) + '0:0'; }
  const [head, rest] = text.includes('::') ? text.split('::') : [text, undefined];
  const h = head ? head.split(':') : [];
  const t = rest ? rest.split(':') : [];
  const words = [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  words.forEach((w, i) => out.writeUInt16BE(parseInt(w, 16), i * 2));
  if (tail.length) Buffer.from(tail).copy(out, 12);
  return out;
}

function withDot(h: string): string {
  return h.endsWith('.') ? h.toLowerCase() : `${h.toLowerCase()}.`;
}

/** The names a Kubernetes service answers to, as istio-agent generates them. */
function altHosts(hostname: string, ni: NameInfo, ctx: TableContext, domain: string, firstDomainPart: string): string[] {
  if (hostname.endsWith('.')) return [];
  const out = [`${hostname}.`];
  // Another cluster's domain: name.ns could be ambiguous, so only the FQDN.
  if (domain === '' || !hostname.endsWith(domain)) return out;
  out.push(`${ni.shortname}.${ni.namespace}.`);
  if (ctx.proxyNamespace === ni.namespace) out.push(`${ni.shortname}.`);
  out.push(`${ni.shortname}.${ni.namespace}.${firstDomainPart}.`);
  for (const a of ni.altHosts) out.push(`${a}.`);
  return out;
}

export class NameTable {
  private readonly hosts = new Set<string>();
  private readonly a = new Map<string, Answer[]>();
  private readonly aaaa = new Map<string, Answer[]>();
  private readonly cname = new Map<string, string>();
  readonly size: number;

  constructor(entries: ReadonlyMap<string, NameInfo>, ctx: TableContext) {
    const parts = ctx.proxyDomain.split('.').filter(Boolean);
    if (parts[0] === ctx.proxyNamespace) parts.shift();
    const domain = parts.join('.');
    const search = ctx.searchDomains[0] ? withDot(ctx.searchDomains[0]) : '';
    for (const [hostname, ni] of entries) {
      const v4 = ni.ips.filter((ip) => isIP(ip) === 4);
      const v6 = ni.ips.filter((ip) => isIP(ip) === 6);
      if (v4.length === 0 && v6.length === 0) continue;
      const names = ni.registry === 'Kubernetes' ? altHosts(hostname, ni, ctx, domain, parts[0] ?? '') : [withDot(hostname)];
      const all = new Set(names.map((n) => n.toLowerCase()));
      for (const h of all) {
        this.hosts.add(h);
        if (v4.length) this.a.set(h, v4.map((ip) => ({ name: h, type: TYPE.A, ttl: ANSWER_TTL, data: ipBytes(ip) })));
        if (v6.length) this.aaaa.set(h, v6.map((ip) => ({ name: h, type: TYPE.AAAA, ttl: ANSWER_TTL, data: ipBytes(ip) })));
        // The first search domain appended (`reviews.default.svc.cluster.local.default.svc.cluster.local.`) → CNAME to the host.
        if (search && !h.endsWith(search)) {
          const expanded = `${h}${search}`;
          if (!all.has(expanded)) { this.cname.set(expanded, h); this.hosts.add(expanded); }
        }
      }
    }
    this.size = this.hosts.size;
  }

  /** The answers for a question; `found` false means "not ours: forward it". */
  lookup(qtype: number, question: string): Lookup {
    let host = question;
    let wildcard = false;
    if (!this.hosts.has(host)) {
      // `*.example.com.` covers `a.b.example.com.`: try each parent.
      const labels = host.split('.').filter(Boolean);
      let hit: string | undefined;
      for (let i = 1; i < labels.length && !hit; i++) {
        const w = `*.${labels.slice(i).join('.')}.`;
        if (this.hosts.has(w)) hit = w;
      }
      if (!hit) return NOT_FOUND;
      host = hit;
      wildcard = true;
    }
    if (qtype !== TYPE.A && qtype !== TYPE.AAAA) return NOT_FOUND;
    const out: Answer[] = [];
    const target = this.cname.get(host);
    if (target !== undefined) {
      out.push({ name: question, type: TYPE.CNAME, ttl: ANSWER_TTL, data: target });
      host = target;
    }
    const ips = (qtype === TYPE.A ? this.a : this.aaaa).get(host);
    // A known name without records of this type: NOERROR with no answers (not even the CNAME, as istio-agent does).
    if (!ips || ips.length === 0) return { found: true, answers: [] };
    // Answers rotate, as kube-dns does, so headless services spread load.
    const start = ips.length > 1 ? Math.floor(Math.random() * ips.length) : 0;
    for (let i = 0; i < ips.length; i++) {
      const r = ips[(start + i) % ips.length];
      out.push(wildcard && target === undefined ? { ...r, name: question } : r);
    }
    return { found: true, answers: out };
  }
}
