/**
 * What the config layer reads out of a resource before or instead of compiling it: the RDS, SDS
 * and ECDS names it depends on, a content hash, and a listener compile that may wait for ECDS.
 */
import { createHash } from 'node:crypto';
import { Msg, parseDurationMs } from '../config/fields.ts';
import { ConfigError } from '../core/errors.ts';
import { compileListener, type ListenerConfig } from '../listener/config.ts';
import { describeTypedConfig, readTypedConfig } from '../config/typed-config.ts';
import { HTTP_FILTERS_BY_URL } from '../filters/http/registry.ts';
import { NETWORK_FILTERS_BY_URL } from '../filters/network/registry.ts';
import { ExtensionConfigPending } from './ecds.ts';

type Json = Record<string, unknown>;

export function contentHash(json: Json): string {
  return createHash('sha1').update(JSON.stringify(json)).digest('base64');
}

/** The compiled listener, or undefined while a filter waits for its ECDS config. */
export function compileOrWait(json: Json): ListenerConfig | undefined {
  try {
    return compileListener(new Msg(json, ''), 0);
  } catch (e) {
    if (e instanceof ExtensionConfigPending) return undefined;
    throw e;
  }
}

/** An extension config must compile as the HTTP or network filter its type names. */
export function validateExtension(name: string, typedConfig: Json): void {
  const typed = readTypedConfig(new Msg({ typed_config: typedConfig }, ''));
  const http = HTTP_FILTERS_BY_URL.get(typed.url);
  if (http) { http.compile(name, typed.msg); return; }
  const net = NETWORK_FILTERS_BY_URL.get(typed.url);
  if (net) { net.compile(name, typed.msg); return; }
  throw new ConfigError('typed_config', `unsupported extension ${describeTypedConfig(typed, name)}`);
}

/** The names of the filters in a listener that take their config from ECDS. */
export function ecdsNames(json: unknown, out: string[] = []): string[] {
  if (Array.isArray(json)) { for (const x of json) ecdsNames(x, out); return out; }
  if (json === null || typeof json !== 'object') return out;
  const o = json as Json;
  if (o.config_discovery && typeof o.name === 'string' && !out.includes(o.name)) out.push(o.name);
  for (const k in o) { const v = o[k]; if (v !== null && typeof v === 'object') ecdsNames(v, out); }
  return out;
}

/** Secret names a listener or cluster asks SDS for over ADS (`sds_config: {ads: {}}`). */
export function adsSecretNames(json: unknown, out: string[] = []): string[] {
  if (Array.isArray(json)) { for (const x of json) adsSecretNames(x, out); return out; }
  if (json === null || typeof json !== 'object') return out;
  const o = json as Json;
  const sds = o.sds_config as Json | undefined;
  if (sds && sds.ads !== undefined && typeof o.name === 'string' && !out.includes(o.name)) out.push(o.name);
  // (for-in, not Object.values: no array per object of every cluster and listener walked)
  for (const k in o) { const v = o[k]; if (v !== null && typeof v === 'object') adsSecretNames(v, out); }
  return out;
}

/** Envoy's default initial_fetch_timeout for a config source that does not set one. */
const DEFAULT_FETCH_TIMEOUT_MS = 15_000;

function fetchTimeoutMs(configSource: unknown): number {
  const v = configSource !== null && typeof configSource === 'object' ? (configSource as Json).initial_fetch_timeout : undefined;
  return v === undefined ? DEFAULT_FETCH_TIMEOUT_MS : parseDurationMs(v) ?? DEFAULT_FETCH_TIMEOUT_MS;
}

/** An RDS name a listener waits for, with its config source's initial_fetch_timeout. */
export interface RdsSubscription {
  readonly name: string;
  readonly fetchTimeoutMs: number;
}

/** The RDS route configs an (already decoded) Listener uses. */
export function rdsSubscriptions(json: unknown, out: RdsSubscription[] = []): RdsSubscription[] {
  if (Array.isArray(json)) { for (const x of json) rdsSubscriptions(x, out); return out; }
  if (json === null || typeof json !== 'object') return out;
  const o = json as Json;
  const rds = o.rds as Json | undefined;
  if (rds && typeof rds.route_config_name === 'string' && !out.some((s) => s.name === rds.route_config_name)) {
    out.push({ name: rds.route_config_name, fetchTimeoutMs: fetchTimeoutMs(rds.config_source) });
  }
  for (const v of Object.values(o)) if (v !== null && typeof v === 'object') rdsSubscriptions(v, out);
  return out;
}

/** An EDS cluster's initial_fetch_timeout (eds_cluster_config.eds_config). */
export function edsFetchTimeoutMs(cluster: Json): number {
  const eds = cluster.eds_cluster_config as Json | undefined;
  return fetchTimeoutMs(eds?.eds_config);
}
