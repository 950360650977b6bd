import type { ConnInfo } from '../../../listener/conn-info.ts';
import type { LogEntry } from '../../../telemetry/log-entry.ts';

/** One TCP connection's outcome, for stats and access logs. */
export class TcpRecord implements LogEntry {
  readonly conn: ConnInfo;
  readonly startTime = Date.now();
  readonly startMs = performance.now();
  readonly protocol = '';
  readonly status = 0;
  readonly details = '';
  readonly routeName = '';
  flags = '-';
  bytesReceived = 0;
  bytesSent = 0;
  durationMs = 0;
  upstreamHost = '';
  upstreamLocalAddress = '';
  upstreamCluster = '';

  constructor(conn: ConnInfo) {
    this.conn = conn;
  }

  requestHeader(): undefined { return undefined; }
  responseHeader(): undefined { return undefined; }
}
