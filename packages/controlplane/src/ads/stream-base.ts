import type { ResourceView } from './snapshot.ts';
import type { StreamEvents } from './events.ts';

/** What both ADS stream kinds share: the view, the sender, events, the node, and nonces. */
export abstract class StreamBase {
  protected readonly view: ResourceView;
  protected readonly send: (b: Buffer) => void;
  protected readonly events: StreamEvents;
  nodeId = '';
  private nonceSeq = 0;

  constructor(view: ResourceView, send: (b: Buffer) => void, events: StreamEvents) {
    this.view = view;
    this.send = send;
    this.events = events;
  }

  /** The first request that names a node identifies the stream. */
  protected noteNode(node: Record<string, unknown> | undefined): void {
    if (node?.id !== undefined && this.nodeId === '') { this.nodeId = String(node.id); this.events.connected(this.nodeId, node); }
  }

  protected nextNonce(): string {
    return String(++this.nonceSeq);
  }

  abstract onRequest(bytes: Buffer): void;
  abstract onSnapshot(): void;
}
