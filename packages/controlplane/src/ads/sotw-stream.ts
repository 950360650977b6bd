/**
 * One State-of-the-World ADS stream: per type, what the client subscribed to and what
 * we last sent. Responses go out when the subscription or the resources change; stale
 * nonces are ignored; NACKs are recorded and the same version is not re-sent.
 *
 * A change of content sends LDS and CDS whole (their responses are the state of the world) but
 * only the changed resources of the other types, as istiod's incremental EDS does: Envoy keeps
 * a subscribed endpoint set, route or secret a response leaves out. One endpoint change among
 * 5,000 services went out as 5,000 assignments, which the proxy decoded again (0.4-0.6 s).
 */
import { encodeSotwResponse, decodeSotwRequest, DELTA_ONLY, SOTW_FULL_STATE } from '@skua/proxy/xds';
import { setVersion, type CpResource } from './resources.ts';
import { StreamBase } from './stream-base.ts';

interface TypeSub {
  wildcard: boolean;
  names: Set<string>;
  sentVersion: string;
  nonce: string;
  /** Name → version of what the client was sent last (types other than LDS and CDS). */
  sent: Map<string, string>;
}

export class SotwStream extends StreamBase {
  private readonly subs = new Map<string, TypeSub>();
  private readonly refused = new Set<string>();

  onRequest(bytes: Buffer): void {
    const req = decodeSotwRequest(bytes);
    this.noteNode(req.node);
    if (DELTA_ONLY.has(req.type_url)) {
      // ztunnel's types, as istiod serves them: never over SotW. Say so once per stream.
      if (!this.refused.has(req.type_url)) { this.refused.add(req.type_url); this.events.refused?.(this.nodeId, req.type_url, 'served over Delta ADS only'); }
      return;
    }
    let sub = this.subs.get(req.type_url);
    if (sub && req.response_nonce !== '' && req.response_nonce !== sub.nonce) return; // stale
    if (req.error_detail && req.error_detail.message) this.events.nack(this.nodeId, req.type_url, req.version_info, req.error_detail.message);
    else if (sub && req.response_nonce !== '') this.events.ack(this.nodeId, req.type_url, req.version_info);
    const wildcard = req.resource_names.length === 0 || req.resource_names.includes('*');
    const names = new Set(req.resource_names);
    const first = !sub;
    // A resuming client says which version it has: only newer content is sent.
    if (!sub) { sub = { wildcard, names, sentVersion: req.version_info, nonce: '', sent: new Map() }; this.subs.set(req.type_url, sub); }
    const namesChanged = first || sub.wildcard !== wildcard || !sameSet(sub.names, names);
    sub.wildcard = wildcard;
    sub.names = names;
    // A new subscription or a new stream gets everything it asked for.
    if (namesChanged || req.response_nonce === '') this.push(req.type_url, sub, namesChanged && !first, true);
  }

  /** The resources changed: send every type whose content for this client changed. */
  onSnapshot(): void {
    for (const [typeUrl, sub] of this.subs) this.push(typeUrl, sub, false, false);
  }

  private selected(typeUrl: string, sub: TypeSub): CpResource[] {
    const all = this.view.resources(this.nodeId, typeUrl);
    if (sub.wildcard) return [...all.values()];
    const out: CpResource[] = [];
    for (const n of sub.names) { const r = all.get(n); if (r) out.push(r); }
    return out;
  }

  private push(typeUrl: string, sub: TypeSub, force: boolean, whole: boolean): void {
    const list = this.selected(typeUrl, sub);
    const version = setVersion(list);
    if (!force && version === sub.sentVersion) return;
    const full = SOTW_FULL_STATE.has(typeUrl);
    // Named types with nothing to say: Envoy waits (an empty response would not remove anything).
    if (!full && !sub.wildcard && list.length === 0 && sub.sentVersion === '') return;
    const changed = full || whole ? list : list.filter((r) => sub.sent.get(r.name) !== r.version);
    sub.sentVersion = version;
    if (!full) sub.sent = new Map(list.map((r) => [r.name, r.version]));
    // Only resources left the set: nothing to tell (the client keeps them, as it would from the whole set).
    if (changed.length === 0 && !full && !whole) return;
    sub.nonce = this.nextNonce();
    this.events.sent(this.nodeId, typeUrl, changed.length);
    this.send(encodeSotwResponse({ version_info: version, resources: changed.map((r) => r.any), type_url: typeUrl, nonce: sub.nonce }));
  }
}

function sameSet(a: ReadonlySet<string>, b: ReadonlySet<string>): boolean {
  if (a.size !== b.size) return false;
  for (const x of a) if (!b.has(x)) return false;
  return true;
}
