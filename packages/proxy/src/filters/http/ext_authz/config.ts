import { Msg } from '../../../config/fields.ts';
import { probability } from '../../../config/percent.ts';
import { compileHeaderValue, HeaderOps, NO_HEADER_OPS } from '../../../http/header-ops.ts';
import { compileMetadataMatcher, type MetadataPredicate } from '../../../policy/value-matcher.ts';
import { compileStringMatcher, type StringPredicate } from '../../../matchers/string-matcher.ts';
import type { HttpFilterConfig, HttpFilterExtension } from '../types.ts';
import { liveExtAuthz } from './filter.ts';
import { authProtos, statusCodeByName } from './protos.ts';

export const EXT_AUTHZ_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthz';
const PER_ROUTE_TYPE = 'type.googleapis.com/envoy.extensions.filters.http.ext_authz.v3.ExtAuthzPerRoute';

/** with_request_body (BufferSettings). */
export interface BodySettings {
  readonly maxBytes: number;
  readonly allowPartial: boolean;
  readonly packAsBytes: boolean;
}

/** A ListStringMatcher over header names: true when any pattern matches. */
export type NameMatcher = StringPredicate;

export interface GrpcAuthzService {
  readonly kind: 'grpc';
  readonly cluster: string;
  /** :authority of the Check call (envoy_grpc.authority, else the cluster name, as Envoy sends it). */
  readonly authority: string;
  readonly timeoutMs: number;
  readonly initialMetadata: ReadonlyArray<readonly [string, string]>;
}

export interface HttpAuthzService {
  readonly kind: 'http';
  readonly cluster: string;
  readonly timeoutMs: number;
  readonly pathPrefix: string;
  /** Request headers copied to the check (authorization, :method, :path, :authority always). */
  readonly requestHeaders: NameMatcher;
  readonly headersToAdd: HeaderOps;
  readonly upstreamHeaders: NameMatcher | undefined;
  readonly upstreamHeadersToAppend: NameMatcher | undefined;
  /** Headers of a denial that reach the client. */
  readonly clientHeaders: NameMatcher;
  readonly clientHeadersOnSuccess: NameMatcher | undefined;
  readonly metadataFromHeaders: NameMatcher | undefined;
}

export interface ExtAuthzConfig {
  readonly service: GrpcAuthzService | HttpAuthzService;
  readonly failureModeAllow: boolean;
  readonly failureModeAllowHeaderAdd: boolean;
  readonly body: BodySettings | undefined;
  readonly statusOnError: number;
  readonly metadataNamespaces: readonly string[];
  /** filter_enabled.default_value as a probability (1 when unset). */
  readonly enabledFraction: number;
  readonly enabledMetadata: MetadataPredicate | undefined;
  readonly denyAtDisable: boolean;
  readonly includePeerCertificate: boolean;
  readonly includeTlsSession: boolean;
  readonly statPrefix: string;
  readonly labelsKey: string;
  readonly allowedHeaders: NameMatcher | undefined;
  readonly disallowedHeaders: NameMatcher | undefined;
  readonly encodeRawHeaders: boolean;
  readonly ingestMetadata: boolean;
  /** A denial counts in the route cluster's upstream_rq_<code> stats (Envoy's default). */
  readonly chargeClusterStats: boolean;
}

/** ExtAuthzPerRoute compiled: off for the route, or check settings merged over less specific levels. */
export type ExtAuthzPerRoute =
  | { readonly disabled: true }
  | { readonly disabled: false; readonly contextExtensions: Readonly<Record<string, string>>; readonly disableBodyBuffering: boolean; readonly body: BodySettings | undefined };

const FIELDS = ['@type', 'grpc_service', 'http_service', 'transport_api_version', 'failure_mode_allow', 'failure_mode_allow_header_add',
  'with_request_body', 'clear_route_cache', 'status_on_error', 'validate_mutations', 'metadata_context_namespaces',
  'typed_metadata_context_namespaces', 'route_metadata_context_namespaces', 'route_typed_metadata_context_namespaces', 'filter_enabled',
  'filter_enabled_metadata', 'deny_at_disable', 'include_peer_certificate', 'stat_prefix', 'bootstrap_metadata_labels_key', 'allowed_headers',
  'disallowed_headers', 'include_tls_session', 'charge_cluster_response_stats', 'encode_raw_headers', 'decoder_header_mutation_rules',
  'enable_dynamic_metadata_ingestion', 'filter_metadata', 'emit_filter_state_stats'];

/** Fields whose non-default value asks for behaviour not built: refused by name. */
const REFUSED_TRUE = ['clear_route_cache', 'validate_mutations', 'emit_filter_state_stats'];
const REFUSED_SET = ['typed_metadata_context_namespaces', 'route_metadata_context_namespaces', 'route_typed_metadata_context_namespaces',
  'decoder_header_mutation_rules', 'filter_metadata'];

function listMatcher(m: Msg | undefined): NameMatcher | undefined {
  if (!m) return undefined;
  m.onlyFields(['patterns']);
  const ps = m.list('patterns').map(compileStringMatcher);
  if (ps.length === 0) return undefined;
  return (name) => { for (const p of ps) if (p(name)) return true; return false; };
}

function anyOf(names: readonly string[], extra: NameMatcher | undefined): NameMatcher {
  const set = new Set(names);
  return extra ? (n) => set.has(n) || extra(n) : (n) => set.has(n);
}

export function compileBodySettings(m: Msg): BodySettings {
  m.onlyFields(['max_request_bytes', 'allow_partial_message', 'pack_as_bytes']);
  const maxBytes = m.num('max_request_bytes');
  if (!Number.isInteger(maxBytes) || maxBytes <= 0) throw m.error('max_request_bytes', 'must be greater than 0');
  return { maxBytes, allowPartial: m.bool('allow_partial_message'), packAsBytes: m.bool('pack_as_bytes') };
}

/** type.v3.HttpStatus: {code} by number or by StatusCode name (proto-JSON); 0 (Empty) means the default. */
function httpStatus(m: Msg | undefined, fallback: number): number {
  if (!m) return fallback;
  m.onlyFields(['code']);
  const raw = m.raw.code;
  let code = typeof raw === 'string' && !/^\d+$/.test(raw) ? statusCodeByName(raw) : m.num('code');
  if (code === undefined) throw m.error('code', `unknown status ${JSON.stringify(raw)}`);
  if (code === 0) code = fallback;
  if (!Number.isInteger(code) || code < 100 || code > 599) throw m.error('code', `not an HTTP status: ${code}`);
  return code;
}

function compileGrpcService(m: Msg, top: Msg): GrpcAuthzService {
  m.onlyFields(['envoy_grpc', 'google_grpc', 'timeout', 'initial_metadata', 'retry_policy']);
  if (m.has('google_grpc')) throw m.error('google_grpc', 'is not supported (use envoy_grpc)');
  if (m.has('retry_policy')) throw m.error('retry_policy', 'is not supported yet');
  const e = m.requiredMsg('envoy_grpc');
  e.onlyFields(['cluster_name', 'authority', 'retry_policy', 'max_receive_message_length', 'skip_envoy_headers']);
  for (const f of ['retry_policy', 'max_receive_message_length']) if (e.has(f)) throw e.error(f, 'is not supported yet');
  if (e.bool('skip_envoy_headers')) throw e.error('skip_envoy_headers', 'is not supported yet');
  // Envoy refuses AUTO and V2 for the gRPC transport: only V3 speaks envoy.service.auth.v3.
  const version = top.enumOf('transport_api_version', ['AUTO', 'V2', 'V3'] as const);
  if (version !== 'V3') throw top.error('transport_api_version', `must be V3 for grpc_service (got ${version})`);
  const cluster = e.requiredStr('cluster_name');
  // Load the Check protos with the config (about a second the first time), never on a request.
  authProtos();
  return {
    kind: 'grpc', cluster, authority: e.str('authority') || cluster,
    timeoutMs: m.durationMs('timeout', 200),
    initialMetadata: m.list('initial_metadata').map((h) => [h.requiredStr('key').toLowerCase(), h.str('value')] as const),
  };
}

function compileHttpService(m: Msg, top: Msg): HttpAuthzService {
  m.onlyFields(['server_uri', 'path_prefix', 'authorization_request', 'authorization_response', 'retry_policy']);
  if (m.has('retry_policy')) throw m.error('retry_policy', 'is not supported yet');
  const uri = m.requiredMsg('server_uri');
  uri.onlyFields(['uri', 'cluster', 'timeout']);
  uri.requiredStr('uri');
  const prefix = m.str('path_prefix');
  if (prefix && !prefix.startsWith('/')) throw m.error('path_prefix', 'must start with "/"');
  const req = m.msg('authorization_request');
  req?.onlyFields(['allowed_headers', 'headers_to_add']);
  const res = m.msg('authorization_response');
  res?.onlyFields(['allowed_upstream_headers', 'allowed_upstream_headers_to_append', 'allowed_client_headers',
    'allowed_client_headers_on_success', 'dynamic_metadata_from_headers']);
  // The top-level allowed_headers replaces the deprecated authorization_request.allowed_headers.
  const allowed = listMatcher(top.msg('allowed_headers')) ?? listMatcher(req?.msg('allowed_headers'));
  const adds = (req?.list('headers_to_add') ?? []).map((h) => {
    const key = h.requiredStr('key').toLowerCase();
    const { literal, format } = compileHeaderValue(h.str('value'), 'request', h.field('value'));
    return { key, value: literal, format, action: 'OVERWRITE_IF_EXISTS_OR_ADD' as const, keepEmpty: false };
  });
  const client = listMatcher(res?.msg('allowed_client_headers'));
  return {
    kind: 'http', cluster: uri.requiredStr('cluster'), timeoutMs: uri.durationMs('timeout', 200), pathPrefix: prefix,
    requestHeaders: anyOf(['authorization', ':method', ':path', ':authority'], allowed),
    headersToAdd: adds.length ? new HeaderOps(adds, []) : NO_HEADER_OPS,
    upstreamHeaders: listMatcher(res?.msg('allowed_upstream_headers')),
    upstreamHeadersToAppend: listMatcher(res?.msg('allowed_upstream_headers_to_append')),
    // Empty: every header of the denial but Host; else the listed ones plus status, length, www-authenticate, location.
    clientHeaders: client ? anyOf([':status', 'content-length', 'www-authenticate', 'location'], client) : (n) => n !== ':authority' && n !== 'host',
    clientHeadersOnSuccess: listMatcher(res?.msg('allowed_client_headers_on_success')),
    metadataFromHeaders: listMatcher(res?.msg('dynamic_metadata_from_headers')),
  };
}

export function compileExtAuthz(m: Msg): ExtAuthzConfig {
  m.onlyFields(FIELDS);
  for (const f of REFUSED_TRUE) if (m.bool(f)) throw m.error(f, 'is not supported yet');
  for (const f of REFUSED_SET) if (m.has(f) && !(Array.isArray(m.raw[f]) && (m.raw[f] as unknown[]).length === 0)) throw m.error(f, 'is not supported yet');
  if (m.has('grpc_service') && m.has('http_service')) throw m.error('', 'only one of grpc_service, http_service may be set');
  let service: GrpcAuthzService | HttpAuthzService;
  if (m.has('grpc_service')) service = compileGrpcService(m.requiredMsg('grpc_service'), m);
  else if (m.has('http_service')) service = compileHttpService(m.requiredMsg('http_service'), m);
  else throw m.error('', 'one of grpc_service, http_service is required');
  const fe = m.msg('filter_enabled');
  fe?.onlyFields(['default_value', 'runtime_key']);
  const dad = m.msg('deny_at_disable');
  dad?.onlyFields(['default_value', 'runtime_key']);
  return {
    service,
    failureModeAllow: m.bool('failure_mode_allow'),
    failureModeAllowHeaderAdd: m.bool('failure_mode_allow_header_add'),
    body: m.has('with_request_body') ? compileBodySettings(m.requiredMsg('with_request_body')) : undefined,
    statusOnError: httpStatus(m.msg('status_on_error'), 403),
    metadataNamespaces: m.strList('metadata_context_namespaces'),
    enabledFraction: fe ? probability(fe.msg('default_value'), 1) : 1,
    enabledMetadata: m.has('filter_enabled_metadata') ? compileMetadataMatcher(m.requiredMsg('filter_enabled_metadata')) : undefined,
    denyAtDisable: dad?.bool('default_value') ?? false,
    includePeerCertificate: m.bool('include_peer_certificate'),
    includeTlsSession: m.bool('include_tls_session'),
    statPrefix: m.str('stat_prefix'),
    labelsKey: m.str('bootstrap_metadata_labels_key'),
    allowedHeaders: service.kind === 'grpc' ? listMatcher(m.msg('allowed_headers')) : undefined,
    disallowedHeaders: listMatcher(m.msg('disallowed_headers')),
    encodeRawHeaders: m.bool('encode_raw_headers'),
    ingestMetadata: m.bool('enable_dynamic_metadata_ingestion', true),
    chargeClusterStats: m.bool('charge_cluster_response_stats', true),
  };
}

export function compileExtAuthzPerRoute(m: Msg): ExtAuthzPerRoute {
  const type = m.str('@type');
  if (type && type !== PER_ROUTE_TYPE) throw m.error('@type', `expected ${PER_ROUTE_TYPE}, got ${type}`);
  m.onlyFields(['@type', 'disabled', 'check_settings']);
  if (m.has('disabled') && m.has('check_settings')) throw m.error('', 'only one of disabled, check_settings may be set');
  if (m.has('disabled')) {
    if (!m.bool('disabled')) throw m.error('disabled', 'must be true when set');
    return { disabled: true };
  }
  const cs = m.requiredMsg('check_settings');
  cs.onlyFields(['context_extensions', 'disable_request_body_buffering', 'with_request_body']);
  const ext: Record<string, string> = {};
  const ce = cs.msg('context_extensions');
  for (const k of ce ? Object.keys(ce.raw) : []) ext[k] = (ce as Msg).str(k);
  const disableBodyBuffering = cs.bool('disable_request_body_buffering');
  if (disableBodyBuffering && cs.has('with_request_body')) throw cs.error('with_request_body', 'cannot be set with disable_request_body_buffering');
  return {
    disabled: false, contextExtensions: ext, disableBodyBuffering,
    body: cs.has('with_request_body') ? compileBodySettings(cs.requiredMsg('with_request_body')) : undefined,
  };
}

export const EXT_AUTHZ_EXTENSION: HttpFilterExtension = {
  typeUrl: EXT_AUTHZ_TYPE,
  legacyName: 'envoy.filters.http.ext_authz',
  compile(name: string, m: Msg | undefined): HttpFilterConfig {
    const config = compileExtAuthz(m ?? new Msg({}, name));
    return { name, perRoute: compileExtAuthzPerRoute, live: (scope) => liveExtAuthz(name, config, scope) };
  },
};
