/**
 * One Delta ADS stream: per type, the names the client subscribed to (or wildcard) and the
 * version of each resource it has. Only resources whose version differs are sent, and
 * removals are named. Sent versions count as held (NACKed content is not re-sent until it
 * changes, as istiod does).
 */
import { decodeDeltaRequest, encodeDeltaResponse, type DeltaResource } from '@skua/proxy/xds';
import { setVersion } from './resources.ts';
import { StreamBase } from './stream-base.ts';

interface DeltaSub {
  wildcard: boolean;
  readonly names: Set<string>;
  /** What the client holds: name → version. */
  readonly held: Map<string, string>;
  nonce: string;
}

export class DeltaStream extends StreamBase {
  private readonly subs = new Map<string, DeltaSub>();

  onRequest(bytes: Buffer): void {
    const req = decodeDeltaRequest(bytes);
    this.noteNode(req.node);
    let sub = this.subs.get(req.type_url);
    if (req.response_nonce !== '') {
      if (req.error_detail && req.error_detail.message) this.events.nack(this.nodeId, req.type_url, '', req.error_detail.message);
      else this.events.ack(this.nodeId, req.type_url, '');
    }
    if (!sub) {
      const wildcard = req.resource_names_subscribe.length === 0 || req.resource_names_subscribe.includes('*');
      sub = { wildcard, names: new Set(req.resource_names_subscribe.filter((n) => n !== '*')), held: new Map(Object.entries(req.initial_resource_versions)), nonce: '' };
      this.subs.set(req.type_url, sub);
      this.push(req.type_url, sub, true);
      return;
    }
    let changed = false;
    for (const n of req.resource_names_subscribe) {
      if (n === '*') { if (!sub.wildcard) { sub.wildcard = true; changed = true; } continue; }
      if (!sub.names.has(n)) { sub.names.add(n); changed = true; }
    }
    for (const n of req.resource_names_unsubscribe) {
      if (n === '*') { sub.wildcard = false; continue; }
      sub.names.delete(n);
      sub.held.delete(n);
    }
    if (changed) this.push(req.type_url, sub, false);
  }

  onSnapshot(): void {
    for (const [typeUrl, sub] of this.subs) this.push(typeUrl, sub, false);
  }

  /** Sends what differs from what the client holds (on the first request, even an empty answer). */
  private push(typeUrl: string, sub: DeltaSub, first: boolean): void {
    const all = this.view.resources(this.nodeId, typeUrl);
    const out: DeltaResource[] = [];
    const removed: string[] = [];
    const consider = (name: string): void => {
      const r = all.get(name);
      if (!r) return;
      if (sub.held.get(name) === r.version) return;
      out.push({ name, version: r.version, resource: r.any });
      sub.held.set(name, r.version);
    };
    if (sub.wildcard) for (const name of all.keys()) consider(name);
    for (const name of sub.names) consider(name);
    for (const name of [...sub.held.keys()]) {
      if (!all.has(name)) { removed.push(name); sub.held.delete(name); }
    }
    // A wildcard subscriber gets an answer on its first request even when empty, so it can finish initialising.
    if (out.length === 0 && removed.length === 0 && !(first && sub.wildcard)) return;
    sub.nonce = this.nextNonce();
    this.events.sent(this.nodeId, typeUrl, out.length);
    this.send(encodeDeltaResponse({
      system_version_info: setVersion(all.values()), resources: out, type_url: typeUrl, nonce: sub.nonce, removed_resources: removed,
    }));
  }
}
