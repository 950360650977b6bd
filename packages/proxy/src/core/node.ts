/**
 * This proxy's own xDS node (id, cluster, metadata, locality): one per process, set when the
 * bootstrap loads. Filters that label telemetry or exchange peer metadata read it when made live.
 */
export interface LocalNode {
  readonly id: string;
  readonly cluster: string;
  /** Node metadata as Istio sets it (NAME, NAMESPACE, LABELS, WORKLOAD_NAME, MESH_ID, ...). */
  readonly metadata: Readonly<Record<string, unknown>>;
  readonly locality: Readonly<{ region?: string; zone?: string; sub_zone?: string }>;
}

let current: LocalNode = { id: '', cluster: '', metadata: {}, locality: {} };

export function setLocalNode(node: LocalNode): void {
  current = node;
}

export function localNode(): LocalNode {
  return current;
}
