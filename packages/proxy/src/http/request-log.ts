/**
 * Debug and trace lines about requests (Envoy's `http` and `router` loggers): at trace the request
 * as it arrives, at debug one line when it completes (status, response flags, details, upstream
 * host, bytes, duration) and each upstream failure. Callers test `debugOn` / `traceOn` first, so a
 * request costs one field read when these levels are off.
 */
import { logger } from '../core/log.ts';
import type { RequestRecord } from './request-record.ts';
import type { Exchange } from './exchange.ts';

export const httpLog = logger('http');
export const routerLog = logger('router');

const tag = (ex: Exchange): string => `[C${ex.conn.id}]`;

export function traceRequestStart(ex: Exchange): void {
  httpLog.trace(`${tag(ex)} request ${ex.method} ${ex.scheme}://${ex.authority}${ex.path} ${ex.protocol} from ${ex.conn.remoteAddress}:${ex.conn.remotePort}`);
}

export function debugRequestDone(rec: RequestRecord): void {
  const ex = rec.ex;
  const upstream = rec.upstreamCluster ? ` cluster '${rec.upstreamCluster}'${rec.upstreamHost ? ` host ${rec.upstreamHost}` : ''}` : '';
  httpLog.debug(`${tag(ex)} ${ex.method} ${ex.authority}${rec.originalPath} → ${rec.status || '-'} flags ${rec.flags}${rec.details ? ` details ${rec.details}` : ''}`
    + `${upstream}${rec.routeName ? ` route '${rec.routeName}'` : ''}, ${rec.bytesReceived} B in, ${rec.bytesSent} B out, ${Math.round(rec.durationMs)} ms`);
}

export function debugUpstreamFailure(rec: RequestRecord, host: string, failure: string, err: Error): void {
  const code = (err as { code?: string }).code;
  routerLog.debug(`${tag(rec.ex)} upstream ${host} for ${rec.ex.method} ${rec.ex.authority}${rec.originalPath}: ${failure} (${code ? `${code}: ` : ''}${err.message})`);
}
