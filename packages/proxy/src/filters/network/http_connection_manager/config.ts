import type { Msg } from '../../../config/fields.ts';
import { RouteTable } from '../../../http/route-config.ts';
import { EMPTY_ROUTES, rdsRoute, type RdsRoute } from '../../../http/rds.ts';
import type { PerFilterCompilers } from '../../../http/per-filter-config.ts';
import { compileRouterFilter, ROUTER_TYPE, type RouterFilterConfig } from '../../http/router/config.ts';
import { compileAccessLogs, type AccessLogger } from '../../../telemetry/access-log.ts';
import { compileLocalReplyConfig, type LocalReplyConfig } from '../../../http/local-reply-config.ts';
import { HTTP_FILTERS_BY_NAME, HTTP_FILTERS_BY_URL } from '../../http/registry.ts';
import type { HttpFilterConfig } from '../../http/types.ts';
import type { PathNormalization } from '../../../http/path-normalize.ts';
import { compileXfcc, type XfccConfig } from '../../../http/xfcc.ts';
import { describeTypedConfig, readFilterConfig } from '../../../config/typed-config.ts';

export const HCM_TYPE = 'type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager';
const CODECS = ['AUTO', 'HTTP1', 'HTTP2', 'HTTP3'] as const;
const SERVER_HEADER = ['OVERWRITE', 'APPEND_IF_ABSENT', 'PASS_THROUGH'] as const;
const UNDERSCORES = ['ALLOW', 'REJECT_REQUEST', 'DROP_HEADER'] as const;

/** Fields that change behaviour and are not built yet: refused rather than ignored. */
const NOT_YET = ['scoped_routes', 'add_user_agent', 'internal_address_config', 'original_ip_detection_extensions', 'early_header_mutation_extensions',
  'strip_matching_host_port', 'strip_any_host_port', 'path_normalization_options'];

export interface HcmConfig {
  readonly statPrefix: string;
  readonly codec: (typeof CODECS)[number];
  /** The inline route_config (EMPTY_ROUTES when routes come from RDS). */
  readonly routes: RouteTable;
  /** The RDS route config this HCM follows, when `rds` is used instead of an inline one. */
  readonly rds: RdsRoute | undefined;
  /** typed_per_filter_config compilers of this HCM's filters (for RDS tables). */
  readonly perFilterCompilers: PerFilterCompilers;
  readonly router: RouterFilterConfig;
  /** The HTTP filters before the router, in order. */
  readonly httpFilters: readonly HttpFilterConfig[];
  readonly serverName: string;
  readonly serverHeader: (typeof SERVER_HEADER)[number];
  readonly useRemoteAddress: boolean;
  readonly skipXffAppend: boolean;
  readonly generateRequestId: boolean;
  readonly preserveExternalRequestId: boolean;
  readonly schemeOverwrite: string;
  readonly idleTimeoutMs: number;
  readonly streamIdleTimeoutMs: number;
  readonly requestTimeoutMs: number;
  readonly requestHeadersTimeoutMs: number;
  readonly maxRequestHeadersKb: number;
  readonly maxHeadersCount: number;
  readonly underscores: (typeof UNDERSCORES)[number];
  readonly drainTimeoutMs: number;
  readonly acceptHttp10: boolean;
  readonly h2MaxConcurrentStreams: number;
  readonly h2InitialStreamWindow: number;
  readonly h2InitialConnectionWindow: number;
  readonly h2AllowConnect: boolean;
  /** HCM-level upgrade_configs: upgrade type (lower case) → enabled. */
  readonly upgrades: ReadonlyMap<string, boolean>;
  readonly accessLogs: readonly AccessLogger[];
  readonly localReply: LocalReplyConfig | undefined;
  readonly pathNormalization: PathNormalization | undefined;
  /** forward_client_cert_details / set_current_client_cert_details (default SANITIZE, as Envoy). */
  readonly xfcc: XfccConfig;
}

export function compileHcm(m: Msg): HcmConfig {
  for (const f of NOT_YET) if (m.has(f)) throw m.error(f, 'is not supported yet');
  const rc = m.msg('route_config');
  const rds = m.msg('rds');
  if (!rc && !rds) throw m.error('route_config', 'an inline route_config or rds is required');
  if (rc && rds) throw m.error('rds', 'route_config and rds are mutually exclusive');
  if (rds) readRdsSource(rds);
  readTracing(m);
  readRequestIdExtension(m);
  const filters = m.list('http_filters');
  if (filters.length === 0) throw m.error('http_filters', 'the router filter is required');
  let router: RouterFilterConfig | undefined;
  const httpFilters: HttpFilterConfig[] = [];
  for (const [i, f] of filters.entries()) {
    const typed = readFilterConfig(f);
    const tc = typed.msg;
    const url = typed.url;
    const name = f.requiredStr('name');
    const isRouter = url === ROUTER_TYPE || (!tc && name === 'envoy.filters.http.router');
    if (!isRouter) {
      const ext = tc ? HTTP_FILTERS_BY_URL.get(url) : HTTP_FILTERS_BY_NAME.get(name);
      if (ext) { if (!f.bool('disabled')) httpFilters.push(ext.compile(name, tc)); continue; }
      if (f.bool('is_optional')) continue;
      throw f.error(tc ? 'typed_config' : 'name', `unsupported HTTP filter ${describeTypedConfig(typed, name)}`);
    }
    if (i !== filters.length - 1) throw f.error('', 'the router must be the last HTTP filter');
    router = compileRouterFilter(tc);
  }
  const perRoute = new Map<string, (m: Msg) => unknown>();
  for (const f of httpFilters) if (f.perRoute) perRoute.set(f.name, f.perRoute.bind(f));
  const common = m.msg('common_http_protocol_options');
  const h1 = m.msg('http_protocol_options');
  const h2 = m.msg('http2_protocol_options');
  const upgrades = new Map<string, boolean>();
  for (const u of m.list('upgrade_configs')) {
    if (u.list('filters').length) throw u.error('filters', 'upgrade filter chains are not supported');
    upgrades.set(u.requiredStr('upgrade_type').toLowerCase(), u.bool('enabled', true));
  }
  const maxKb = m.num('max_request_headers_kb', 60);
  if (maxKb < 1 || maxKb > 8192) throw m.error('max_request_headers_kb', 'must be between 1 and 8192');
  const schemeOverwrite = readSchemeOverwrite(m);
  return {
    statPrefix: m.requiredStr('stat_prefix'),
    codec: m.enumOf('codec_type', CODECS),
    routes: rc ? new RouteTable(rc, perRoute) : EMPTY_ROUTES,
    rds: rds ? followRds(rds.requiredStr('route_config_name'), m.requiredStr('stat_prefix')) : undefined,
    perFilterCompilers: perRoute,
    router: router as RouterFilterConfig,
    httpFilters,
    serverName: m.str('server_name', 'envoy'),
    serverHeader: m.enumOf('server_header_transformation', SERVER_HEADER),
    useRemoteAddress: m.bool('use_remote_address'),
    skipXffAppend: m.bool('skip_xff_append'),
    generateRequestId: m.bool('generate_request_id', true),
    preserveExternalRequestId: m.bool('preserve_external_request_id'),
    schemeOverwrite,
    idleTimeoutMs: common?.durationMs('idle_timeout', 3_600_000) ?? 3_600_000,
    streamIdleTimeoutMs: m.durationMs('stream_idle_timeout', 300_000),
    requestTimeoutMs: m.durationMs('request_timeout', 0),
    requestHeadersTimeoutMs: m.durationMs('request_headers_timeout', 0),
    maxRequestHeadersKb: maxKb,
    maxHeadersCount: common?.num('max_headers_count', 100) ?? 100,
    underscores: common?.enumOf('headers_with_underscores_action', UNDERSCORES) ?? 'ALLOW',
    drainTimeoutMs: m.durationMs('drain_timeout', 5000),
    acceptHttp10: h1?.bool('accept_http_10') ?? false,
    h2MaxConcurrentStreams: h2?.num('max_concurrent_streams', 2147483647) ?? 2147483647,
    h2InitialStreamWindow: h2?.num('initial_stream_window_size', 268435456) ?? 268435456,
    h2InitialConnectionWindow: h2?.num('initial_connection_window_size', 268435456) ?? 268435456,
    h2AllowConnect: h2?.bool('allow_connect') ?? false,
    upgrades,
    accessLogs: compileAccessLogs(m.list('access_log')),
    pathNormalization: readPathNormalization(m),
    xfcc: compileXfcc(m),
    localReply: m.has('local_reply_config') ? compileLocalReplyConfig(m.requiredMsg('local_reply_config')) : undefined,
  };
}

/**
 * `tracing` without a `provider` (what istiod sends when the mesh has no tracer in the HCM): Envoy
 * then only samples and tags, and with no tracer nothing is reported, so it is accepted as such.
 * A provider would mean exporting spans, which is not built.
 */
function readTracing(m: Msg): void {
  const t = m.msg('tracing');
  if (!t) return;
  if (t.has('provider')) throw t.error('provider', 'is not supported yet (no span exporter is built)');
  for (const f of ['client_sampling', 'random_sampling', 'overall_sampling']) {
    const pct = t.msg(f)?.num('value', 100) ?? 100;
    if (pct < 0 || pct > 100) throw t.error(`${f}.value`, 'must be between 0 and 100');
  }
}

/** The UUID request id extension is the default behaviour (x-request-id generated as a UUIDv4). */
function readRequestIdExtension(m: Msg): void {
  const ext = m.msg('request_id_extension');
  if (!ext) return;
  const url = ext.msg('typed_config')?.str('@type') ?? '';
  if (url !== 'type.googleapis.com/envoy.extensions.request_id.uuid.v3.UuidRequestIdConfig') throw ext.error('typed_config', `unsupported request id extension ${url}`);
}

const ESCAPED_SLASHES = ['IMPLEMENTATION_SPECIFIC_DEFAULT', 'KEEP_UNCHANGED', 'REJECT_REQUEST', 'UNESCAPE_AND_REDIRECT', 'UNESCAPE_AND_FORWARD'] as const;

function readPathNormalization(m: Msg): PathNormalization | undefined {
  const normalize = m.bool('normalize_path');
  const mergeSlashes = m.bool('merge_slashes');
  const action = m.enumOf('path_with_escaped_slashes_action', ESCAPED_SLASHES);
  const escapedSlashes = action === 'IMPLEMENTATION_SPECIFIC_DEFAULT' ? 'KEEP_UNCHANGED' : action;
  return normalize || mergeSlashes || escapedSlashes !== 'KEEP_UNCHANGED' ? { normalize, mergeSlashes, escapedSlashes } : undefined;
}

function followRds(name: string, statPrefix: string): RdsRoute {
  const route = rdsRoute(name);
  route.noteStatPrefix(statPrefix);
  return route;
}

/** RDS over ADS is what istiod sends; other config sources are not built. */
function readRdsSource(rds: Msg): void {
  const cs = rds.requiredMsg('config_source');
  if (!cs.has('ads')) throw cs.error('', 'only `ads: {}` config sources are supported for RDS');
}

/** scheme_header_transformation: the SchemeHeaderTransformation message, or the enum form with a sibling `scheme`. */
function readSchemeOverwrite(m: Msg): string {
  const raw = m.raw.scheme_header_transformation;
  if (raw === undefined || raw === null) return '';
  if (typeof raw === 'string') {
    if (raw !== 'OVERWRITE_SCHEME') throw m.error('scheme_header_transformation', `unsupported value ${raw}`);
    const scheme = m.requiredStr('scheme');
    if (scheme !== 'http' && scheme !== 'https') throw m.error('scheme', 'must be http or https');
    return scheme;
  }
  const t = m.requiredMsg('scheme_header_transformation');
  if (t.bool('match_upstream')) throw t.error('match_upstream', 'is not supported yet');
  return t.str('scheme_to_overwrite');
}
