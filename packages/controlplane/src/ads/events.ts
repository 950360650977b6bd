/** What an ADS stream reports to the server (logs, stats, tests). */
export interface StreamEvents {
  connected(nodeId: string, node: Record<string, unknown>): void;
  ack(nodeId: string, typeUrl: string, version: string): void;
  nack(nodeId: string, typeUrl: string, version: string, message: string): void;
  sent(nodeId: string, typeUrl: string, resources: number): void;
  /** A subscription the stream will not serve (e.g. a Delta-only type over SotW). */
  refused?(nodeId: string, typeUrl: string, why: string): void;
}
