import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileLocalReplyConfig, rewriteLocalReply, type LocalReplyConfig } from '../src/http/local-reply-config.ts';
import { RequestRecord } from '../src/http/request-record.ts';
import type { Exchange } from '../src/http/exchange.ts';
import type { ConnInfo } from '../src/listener/conn-info.ts';

type Json = Record<string, unknown>;

const CONN: ConnInfo = {
  id: 1, remoteAddress: '10.0.0.1', remotePort: 40000, localAddress: '10.0.0.2', localPort: 8080,
  originalDst: { address: '10.0.0.2', port: 8080 }, tls: false, serverName: '', alpn: '', peerUriSans: [], filterState: undefined, startTime: 0,
};

/** A request record over a fake exchange (only the fields local replies read). */
function record(opts: { method?: string; path?: string; headers?: Record<string, string>; flags?: string } = {}): RequestRecord {
  const ex = {
    protocol: 'HTTP/1.1', method: opts.method ?? 'GET', path: opts.path ?? '/api/items?x=1', authority: 'shop.example.com', scheme: 'http',
    headers: { 'user-agent': 'curl/8', ...opts.headers }, conn: CONN,
  } as unknown as Exchange;
  const rec = new RequestRecord(ex, 0);
  if (opts.flags) rec.flags = opts.flags;
  return rec;
}

const compile = (cfg: Json): LocalReplyConfig => compileLocalReplyConfig(new Msg(cfg, 'local_reply_config'));

function reply(cfg: LocalReplyConfig, status: number, body: string, rec = record()): { status: number; body: string; contentType: string | undefined; headers: Json } {
  const headers: Record<string, string | string[] | number | undefined> = {};
  return { ...rewriteLocalReply(cfg, rec, status, body, headers), headers };
}

const statusFilter = (op: string, value: number): Json => ({ status_code_filter: { comparison: { op, value: { default_value: value, runtime_key: 'unused' } } } });
const mapper = (filter: Json, extra: Json = {}): Json => ({ filter, ...extra });

describe('local_reply_config: no mappers', () => {
  test('empty config leaves status and body alone, no content type', () => {
    assert.deepEqual(reply(compile({}), 503, 'no healthy upstream'), { status: 503, body: 'no healthy upstream', contentType: undefined, headers: {} });
  });
});

describe('local_reply_config: status_code_filter', () => {
  const cfg = compile({ mappers: [mapper(statusFilter('EQ', 503), { status_code: 504, body: { inline_string: 'try later' } })] });
  test('EQ matches exactly; status and body are rewritten', () => {
    assert.deepEqual(reply(cfg, 503, 'no healthy upstream').status, 504);
    assert.equal(reply(cfg, 503, 'no healthy upstream').body, 'try later');
    assert.deepEqual(reply(cfg, 502, 'bad gateway'), { status: 502, body: 'bad gateway', contentType: undefined, headers: {} });
  });
  test('GE and LE are inclusive', () => {
    const ge = compile({ mappers: [mapper(statusFilter('GE', 500), { status_code: 590 })] });
    assert.equal(reply(ge, 500, '').status, 590);
    assert.equal(reply(ge, 503, '').status, 590);
    assert.equal(reply(ge, 499, '').status, 499);
    const le = compile({ mappers: [mapper(statusFilter('LE', 404), { status_code: 400 })] });
    assert.equal(reply(le, 404, '').status, 400);
    assert.equal(reply(le, 403, '').status, 400);
    assert.equal(reply(le, 405, '').status, 405);
  });
  test('op defaults to EQ; enum by number works', () => {
    const d = compile({ mappers: [mapper({ status_code_filter: { comparison: { value: { default_value: 404 } } } }, { status_code: 410 })] });
    assert.equal(reply(d, 404, '').status, 410);
    assert.equal(reply(d, 405, '').status, 405);
    const n = compile({ mappers: [mapper({ status_code_filter: { comparison: { op: 1, value: { default_value: 500 } } } }, { status_code: 599 })] });
    assert.equal(reply(n, 501, '').status, 599);
  });
  test('status_code as a UInt32Value wrapper; a mapper without status_code keeps the status', () => {
    assert.equal(reply(compile({ mappers: [mapper(statusFilter('EQ', 403), { status_code: { value: 401 } })] }), 403, '').status, 401);
    const keep = reply(compile({ mappers: [mapper(statusFilter('EQ', 403), { body: { inline_string: 'denied' } })] }), 403, 'RBAC: access denied');
    assert.deepEqual([keep.status, keep.body], [403, 'denied']);
  });
  test('a bad op is a ConfigError naming the field', () => {
    assert.throws(() => compile({ mappers: [mapper(statusFilter('NE', 1))] }), { name: 'ConfigError', path: 'local_reply_config.mappers[0].filter.status_code_filter.comparison.op' });
  });
});

describe('local_reply_config: other filters', () => {
  test('header_filter sees request headers and pseudo-headers', () => {
    const cfg = compile({ mappers: [
      mapper({ header_filter: { header: { name: ':path', string_match: { prefix: '/api' } } } }, { status_code: 599 }),
      mapper({ header_filter: { header: { name: 'x-debug', present_match: true } } }, { status_code: 598 }),
      mapper({ header_filter: { header: { name: ':method', exact_match: 'DELETE' } } }, { status_code: 597 }),
    ] });
    assert.equal(reply(cfg, 503, '', record({ path: '/api/v1' })).status, 599);
    assert.equal(reply(cfg, 503, '', record({ path: '/web', headers: { 'x-debug': '1' } })).status, 598);
    assert.equal(reply(cfg, 503, '', record({ path: '/web', method: 'DELETE' })).status, 597);
    assert.equal(reply(cfg, 503, '', record({ path: '/web' })).status, 503);
  });
  test('response_flag_filter: listed flags, or any flag when the list is empty', () => {
    const listed = compile({ mappers: [mapper({ response_flag_filter: { flags: ['UH', 'NR'] } }, { status_code: 404 })] });
    assert.equal(reply(listed, 503, '', record({ flags: 'UH' })).status, 404);
    assert.equal(reply(listed, 404, '', record({ flags: 'NR' })).status, 404);
    assert.equal(reply(listed, 503, '', record({ flags: 'UF' })).status, 503);
    assert.equal(reply(listed, 503, '', record()).status, 503);
    const any = compile({ mappers: [mapper({ response_flag_filter: {} }, { status_code: 500 })] });
    assert.equal(reply(any, 503, '', record({ flags: 'UT' })).status, 500);
    assert.equal(reply(any, 503, '', record()).status, 503);
  });
  test('and_filter needs every filter; or_filter any; they nest', () => {
    const cfg = compile({ mappers: [
      mapper({ and_filter: { filters: [statusFilter('GE', 500), { header_filter: { header: { name: 'x-a', exact_match: '1' } } }] } }, { status_code: 590 }),
      mapper({ or_filter: { filters: [statusFilter('EQ', 401), { and_filter: { filters: [statusFilter('EQ', 404), { response_flag_filter: { flags: ['NR'] } }] } }] } }, { status_code: 591 }),
    ] });
    assert.equal(reply(cfg, 503, '', record({ headers: { 'x-a': '1' } })).status, 590);
    assert.equal(reply(cfg, 503, '', record({ headers: { 'x-a': '2' } })).status, 503);
    assert.equal(reply(cfg, 401, '').status, 591);
    assert.equal(reply(cfg, 404, '', record({ flags: 'NR' })).status, 591);
    assert.equal(reply(cfg, 404, '').status, 404);
  });
  test('unsupported filters are ConfigErrors naming the filter', () => {
    assert.throws(() => compile({ mappers: [mapper({ duration_filter: {} })] }), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.path, 'local_reply_config.mappers[0].filter');
      assert.match(err.message, /duration_filter/);
      return true;
    });
    assert.throws(() => compile({ mappers: [{ status_code: 500 }] }), { name: 'ConfigError', path: 'local_reply_config.mappers[0].filter' });
  });
});

describe('local_reply_config: mappers', () => {
  test('the first matching mapper wins', () => {
    const cfg = compile({ mappers: [
      mapper(statusFilter('EQ', 500), { status_code: 501 }),
      mapper(statusFilter('GE', 400), { status_code: 402 }),
      mapper(statusFilter('GE', 400), { status_code: 403 }),
    ] });
    assert.equal(reply(cfg, 500, '').status, 501);
    assert.equal(reply(cfg, 503, '').status, 402);
  });
  test('only one mapper applies: a rewritten status is not matched again', () => {
    const cfg = compile({ mappers: [mapper(statusFilter('EQ', 503), { status_code: 500 }), mapper(statusFilter('EQ', 500), { status_code: 418 })] });
    assert.equal(reply(cfg, 503, '').status, 500);
  });
  test('headers_to_add / headers_to_remove apply only when the mapper matches', () => {
    const cfg = compile({ mappers: [mapper(statusFilter('EQ', 429), { headers_to_add: [{ header: { key: 'Retry-After', value: '10' }, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' }] })] });
    assert.deepEqual(reply(cfg, 429, '').headers, { 'retry-after': '10' });
    assert.deepEqual(reply(cfg, 503, '').headers, {});
  });
  test('body from a DataSource', () => {
    const cfg = compile({ mappers: [mapper(statusFilter('EQ', 404), { body: { inline_bytes: Buffer.from('gone').toString('base64') } })] });
    assert.equal(reply(cfg, 404, 'route not found').body, 'gone');
  });
});

describe('local_reply_config: body formats', () => {
  test('text_format_source with %LOCAL_REPLY_BODY% and %RESPONSE_CODE% (the rewritten code)', () => {
    const cfg = compile({
      mappers: [mapper(statusFilter('EQ', 503), { status_code: 504, body: { inline_string: 'upstream gone' } })],
      body_format: { text_format_source: { inline_string: '%LOCAL_REPLY_BODY%:%RESPONSE_CODE%:path=%REQ(:path)%\n' } },
    });
    assert.deepEqual(reply(cfg, 503, 'no healthy upstream'), { status: 504, body: 'upstream gone:504:path=/api/items?x=1\n', contentType: 'text/plain', headers: {} });
    assert.deepEqual(reply(cfg, 404, 'not here'), { status: 404, body: 'not here:404:path=/api/items?x=1\n', contentType: 'text/plain', headers: {} });
  });
  test('text_format and a custom content_type', () => {
    const cfg = compile({ body_format: { text_format: '<h1>%RESPONSE_CODE%</h1><p>%LOCAL_REPLY_BODY%</p>', content_type: 'text/html; charset=UTF-8' } });
    assert.deepEqual(reply(cfg, 503, 'down'), { status: 503, body: '<h1>503</h1><p>down</p>', contentType: 'text/html; charset=UTF-8', headers: {} });
  });
  test('json_format gives application/json', () => {
    const cfg = compile({ body_format: { json_format: { message: '%LOCAL_REPLY_BODY%', path: '%REQ(:path)%' } } });
    const r = reply(cfg, 404, 'route not found');
    assert.equal(r.contentType, 'application/json');
    assert.deepEqual(JSON.parse(r.body), { message: 'route not found', path: '/api/items?x=1' });
  });
  test('body_format_override on the matching mapper beats body_format', () => {
    const cfg = compile({
      mappers: [mapper(statusFilter('EQ', 401), { body_format_override: { text_format_source: { inline_string: 'override %RESPONSE_CODE%' }, content_type: 'text/x-override' } })],
      body_format: { text_format: 'default %RESPONSE_CODE%' },
    });
    assert.deepEqual([reply(cfg, 401, '').body, reply(cfg, 401, '').contentType], ['override 401', 'text/x-override']);
    assert.deepEqual([reply(cfg, 500, '').body, reply(cfg, 500, '').contentType], ['default 500', 'text/plain']);
  });
  test('an override applies even when there is no top-level body_format', () => {
    const cfg = compile({ mappers: [mapper(statusFilter('EQ', 400), { body_format_override: { text_format: '[%LOCAL_REPLY_BODY%]' } })] });
    assert.equal(reply(cfg, 400, 'bad').body, '[bad]');
    assert.equal(reply(cfg, 500, 'other').body, 'other');
  });
  test('the record carries the rewritten status and body (access logs see them)', () => {
    const rec = record();
    reply(compile({ mappers: [mapper(statusFilter('EQ', 503), { status_code: 500 })], body_format: { text_format: '%LOCAL_REPLY_BODY%' } }), 503, 'x', rec);
    assert.equal(rec.status, 500);
    assert.equal(rec.localReplyBody, 'x');
  });
  test('bad body formats are ConfigErrors naming the field', () => {
    assert.throws(() => compile({ body_format: { content_type: 'x' } }), { name: 'ConfigError', path: 'local_reply_config.body_format' });
    assert.throws(() => compile({ body_format: { formatters: [{}], text_format: 'x' } }), { name: 'ConfigError', path: 'local_reply_config.body_format.formatters' });
    assert.throws(() => compile({ body_format: { text_format: '%NOPE%' } }), { name: 'ConfigError', path: 'local_reply_config.body_format.text_format' });
    assert.throws(() => compile({ mappers: [mapper(statusFilter('EQ', 1), { body_format_override: { text_format_source: { inline_string: '%NOPE%' } } })] }),
      { name: 'ConfigError', path: 'local_reply_config.mappers[0].body_format_override.text_format_source' });
  });
});
