/**
 * HBONE's numbers, as ztunnel ships them: port 15008, 4 MiB per-stream and 16 MiB per-connection
 * flow-control windows, 1 MiB frames, at most 100 streams per pooled connection, and unused
 * connections released after 5 minutes.
 */
export const HBONE_PORT = 15008;
export const HBONE_STREAM_WINDOW = 4 << 20;
export const HBONE_CONNECTION_WINDOW = 16 << 20;
export const HBONE_FRAME_SIZE = 1 << 20;
export const HBONE_MAX_STREAMS_PER_CONNECTION = 100;
export const HBONE_IDLE_RELEASE_MS = 5 * 60_000;
/** Node's per-session buffer budget (MB): a full connection window must fit, with headroom. */
export const HBONE_SESSION_MEMORY_MB = 64;

/** The HTTP/2 SETTINGS both ends send. */
export function hboneSettings(streamWindow: number): { initialWindowSize: number; maxFrameSize: number; enablePush: false } {
  return { initialWindowSize: streamWindow, maxFrameSize: HBONE_FRAME_SIZE, enablePush: false };
}
