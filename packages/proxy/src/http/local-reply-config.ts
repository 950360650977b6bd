import type { Msg } from '../config/fields.ts';
import { readDataSource } from '../config/data-source.ts';
import { compileFormat, compileJsonFormat, type Formatter } from '../telemetry/format.ts';
import { compileHeaderMatcher } from './route-match.ts';
import { compileHeaderOpsFrom, type HeaderOps } from './header-ops.ts';
import type { RequestRecord } from './request-record.ts';

/** envoy.config.accesslog.v3.AccessLogFilter, as local_reply_config mappers use it. */
type Filter = (rec: RequestRecord) => boolean;

interface BodyFormat { readonly format: Formatter; readonly contentType: string }

interface Mapper {
  readonly filter: Filter;
  readonly status: number;
  readonly body: string | undefined;
  readonly bodyFormat: BodyFormat | undefined;
  readonly headers: HeaderOps;
}

/** HCM local_reply_config: rewrite local replies (status, body, headers) by filter, then format the body. */
export interface LocalReplyConfig {
  readonly mappers: readonly Mapper[];
  readonly bodyFormat: BodyFormat | undefined;
}

const OPS = ['EQ', 'GE', 'LE'] as const;

function compileFilter(m: Msg): Filter {
  if (m.has('status_code_filter')) {
    const cmp = m.requiredMsg('status_code_filter').requiredMsg('comparison');
    const op = cmp.enumOf('op', OPS);
    const v = cmp.msg('value')?.num('default_value') ?? 0;
    return op === 'EQ' ? (r) => r.status === v : op === 'GE' ? (r) => r.status >= v : (r) => r.status <= v;
  }
  if (m.has('header_filter')) {
    const hm = compileHeaderMatcher(m.requiredMsg('header_filter').requiredMsg('header'));
    return (r) => hm(r.ex);
  }
  if (m.has('response_flag_filter')) {
    const flags = m.requiredMsg('response_flag_filter').strList('flags');
    return (r) => (flags.length === 0 ? r.flags !== '-' : flags.includes(r.flags));
  }
  if (m.has('and_filter')) {
    const fs = m.requiredMsg('and_filter').list('filters').map(compileFilter);
    return (r) => fs.every((f) => f(r));
  }
  if (m.has('or_filter')) {
    const fs = m.requiredMsg('or_filter').list('filters').map(compileFilter);
    return (r) => fs.some((f) => f(r));
  }
  throw m.error('', `unsupported access log filter ${Object.keys(m.raw).join(', ')}`);
}

function compileBodyFormat(m: Msg): BodyFormat {
  if (m.has('formatters')) throw m.error('formatters', 'formatter extensions are not supported');
  const contentType = m.str('content_type');
  if (m.has('text_format')) return { format: compileFormat(m.str('text_format'), m.field('text_format')), contentType: contentType || 'text/plain' };
  if (m.has('text_format_source')) {
    return { format: compileFormat(readDataSource(m.requiredMsg('text_format_source')).toString(), m.field('text_format_source')), contentType: contentType || 'text/plain' };
  }
  if (m.has('json_format')) return { format: compileJsonFormat(m.requiredMsg('json_format').raw, m.field('json_format')), contentType: contentType || 'application/json' };
  throw m.error('', 'one of text_format, text_format_source, json_format is required');
}

export function compileLocalReplyConfig(m: Msg): LocalReplyConfig {
  return {
    mappers: m.list('mappers').map((mm) => ({
      filter: compileFilter(mm.requiredMsg('filter')),
      status: mm.num('status_code'),
      body: mm.has('body') ? readDataSource(mm.requiredMsg('body')).toString() : undefined,
      bodyFormat: mm.has('body_format_override') ? compileBodyFormat(mm.requiredMsg('body_format_override')) : undefined,
      headers: compileHeaderOpsFrom(mm, 'headers_to_add', 'headers_to_remove'),
    })),
    bodyFormat: m.has('body_format') ? compileBodyFormat(m.requiredMsg('body_format')) : undefined,
  };
}

/** Applies the first matching mapper and the body format to a local reply about to be sent. */
export function rewriteLocalReply(cfg: LocalReplyConfig, rec: RequestRecord, status: number, body: string, headers: Record<string, string | string[] | number | undefined>):
  { status: number; body: string; contentType: string | undefined } {
  rec.status = status;
  let format = cfg.bodyFormat;
  for (const mapper of cfg.mappers) {
    if (!mapper.filter(rec)) continue;
    if (mapper.status) status = mapper.status;
    if (mapper.body !== undefined) body = mapper.body;
    mapper.headers.apply(headers as Record<string, string | string[] | undefined>, rec);
    if (mapper.bodyFormat) format = mapper.bodyFormat;
    break;
  }
  if (!format) return { status, body, contentType: undefined };
  rec.status = status;
  rec.localReplyBody = body;
  return { status, body: format.format(rec), contentType: format.contentType };
}
