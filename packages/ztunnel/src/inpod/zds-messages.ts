/**
 * ZDS messages (istio.workload.zds): one protobuf message per SEQPACKET packet, no framing.
 * ztunnel sends ZdsHello then one WorkloadResponse (Ack, error '' = success) per request; the CNI
 * agent sends WorkloadRequest (add with the netns fd, keep, del, snapshot_sent).
 */
import { typeForUrl } from '../core.ts';
import type { Type } from 'protobufjs';

const PREFIX = 'type.googleapis.com/istio.workload.zds.';

function type(name: string): Type {
  const t = typeForUrl(PREFIX + name);
  if (!t) throw new Error(`istio.workload.zds.${name} is not declared`);
  return t;
}

export interface WorkloadInfo {
  readonly name: string;
  readonly namespace: string;
  readonly serviceAccount: string;
}

export type WorkloadRequest =
  | { readonly kind: 'add'; readonly uid: string; readonly info: WorkloadInfo | undefined }
  | { readonly kind: 'keep'; readonly uid: string }
  | { readonly kind: 'del'; readonly uid: string }
  | { readonly kind: 'snapshot_sent' };

export function encodeHello(): Uint8Array {
  return type('ZdsHello').encode({ version: 1 }).finish();
}

export function decodeHello(b: Uint8Array): number {
  return (type('ZdsHello').decode(b) as unknown as { version: number }).version;
}

export function encodeAck(error: string): Uint8Array {
  return type('WorkloadResponse').encode({ ack: { error } }).finish();
}

export function decodeAck(b: Uint8Array): string | undefined {
  const m = type('WorkloadResponse').decode(b) as unknown as { ack?: { error?: string } };
  return m.ack ? m.ack.error ?? '' : undefined;
}

export function encodeRequest(r: WorkloadRequest): Uint8Array {
  const t = type('WorkloadRequest');
  switch (r.kind) {
    case 'add': return t.encode({
      add: { uid: r.uid, workload_info: r.info ? { name: r.info.name, namespace: r.info.namespace, service_account: r.info.serviceAccount } : undefined },
    }).finish();
    case 'keep': return t.encode({ keep: { uid: r.uid } }).finish();
    case 'del': return t.encode({ del: { uid: r.uid } }).finish();
    default: return t.encode({ snapshot_sent: {} }).finish();
  }
}

interface RawRequest {
  add?: { uid?: string; workload_info?: { name?: string; namespace?: string; service_account?: string } };
  keep?: { uid?: string };
  del?: { uid?: string };
  snapshot_sent?: object;
}

/** Throws on bytes that are not a WorkloadRequest with a payload. */
export function decodeRequest(b: Uint8Array): WorkloadRequest {
  const m = type('WorkloadRequest').decode(b) as unknown as RawRequest;
  if (m.add) {
    const wi = m.add.workload_info;
    return { kind: 'add', uid: m.add.uid ?? '', info: wi ? { name: wi.name ?? '', namespace: wi.namespace ?? '', serviceAccount: wi.service_account ?? '' } : undefined };
  }
  if (m.keep) return { kind: 'keep', uid: m.keep.uid ?? '' };
  if (m.del) return { kind: 'del', uid: m.del.uid ?? '' };
  if (m.snapshot_sent) return { kind: 'snapshot_sent' };
  throw new Error('a WorkloadRequest without a payload');
}
