import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { hostname } from 'node:os';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileHeaderOps, compileHeaderOpsFrom, type HeaderOps, type HeaderSide } from '../src/http/header-ops.ts';
import { RequestRecord } from '../src/http/request-record.ts';
import type { Exchange } from '../src/http/exchange.ts';
import type { ConnInfo } from '../src/listener/conn-info.ts';
import type { LogEntry } from '../src/telemetry/log-entry.ts';
import { compileFormat, compileTimeFormat, parseFormatString } from '../src/telemetry/format.ts';

type Json = Record<string, unknown>;
type HeaderMap = Record<string, string | string[] | undefined>;

const CONN: ConnInfo = {
  id: 7, remoteAddress: '10.1.2.3', remotePort: 51000, localAddress: '10.0.0.9', localPort: 15006,
  originalDst: { address: '10.0.0.9', port: 9080 }, tls: false, serverName: '', alpn: '', peerUriSans: [], filterState: undefined, startTime: 0,
};
const START = Date.UTC(2024, 0, 2, 3, 4, 5, 6);

/** A request as the router has it: RequestRecord over an exchange. */
function record(over: { conn?: ConnInfo; headers?: HeaderMap; upstreamHost?: string } = {}): RequestRecord {
  const ex = {
    protocol: 'HTTP/1.1', method: 'POST', path: '/api/v1?x=1', authority: 'reviews:9080', scheme: 'http',
    headers: over.headers ?? { 'user-agent': 'curl/8', 'x-request-id': 'rid-1' }, conn: over.conn ?? CONN,
  } as unknown as Exchange;
  const rec = new RequestRecord(ex, 0);
  (rec as { startTime: number }).startTime = START;
  if (over.upstreamHost) rec.upstreamHost = over.upstreamHost;
  return rec;
}

const opt = (key: string, value: string, extra: Json = {}): Json => ({ header: { key, value }, ...extra });
const ops = (adds: Json[], side: HeaderSide = 'request'): HeaderOps =>
  compileHeaderOps(new Msg({ [`${side}_headers_to_add`]: adds }, 'route'), side);

function run(o: HeaderOps, headers: HeaderMap, ctx?: LogEntry): HeaderMap {
  const copy: HeaderMap = { ...headers };
  o.apply(copy, ctx);
  return copy;
}
const one = (value: string, ctx: LogEntry | undefined = record(), side: HeaderSide = 'request', headers: HeaderMap = {}): string | string[] | undefined =>
  run(ops([opt('x-out', value)], side), headers, ctx)['x-out'];

describe('header formatters: the commands istiod and users write', () => {
  test('downstream addresses and ports', () => {
    assert.equal(one('%DOWNSTREAM_REMOTE_ADDRESS%'), '10.1.2.3:51000');
    assert.equal(one('%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%'), '10.1.2.3');
    assert.equal(one('%DOWNSTREAM_LOCAL_ADDRESS%'), '10.0.0.9:15006');
    assert.equal(one('%DOWNSTREAM_LOCAL_ADDRESS_WITHOUT_PORT%'), '10.0.0.9');
    assert.equal(one('%DOWNSTREAM_LOCAL_PORT%'), '15006');
    assert.equal(one('%DOWNSTREAM_REMOTE_PORT%'), '51000');
  });
  test('IPv6 addresses are bracketed with a port and bare without', () => {
    const v6 = record({ conn: { ...CONN, remoteAddress: '::1', remotePort: 5000 } });
    assert.equal(one('%DOWNSTREAM_REMOTE_ADDRESS%', v6), '[::1]:5000');
    assert.equal(one('%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%', v6), '::1');
  });
  test('HOSTNAME, PROTOCOL', () => {
    assert.equal(one('%HOSTNAME%'), hostname());
    assert.equal(one('%PROTOCOL%'), 'HTTP/1.1');
  });
  test('START_TIME: ISO 8601 by default, strftime-style with an argument', () => {
    assert.equal(one('%START_TIME%'), '2024-01-02T03:04:05.006Z');
    assert.equal(one('%START_TIME(%s)%'), String(Math.floor(START / 1000)));
    assert.equal(one('%START_TIME(%Y/%m/%d %H:%M:%S.%3f)%'), '2024/01/02 03:04:05.006');
    assert.equal(one('%START_TIME(%E3S|%6f|%F %T %z)%'), '05.006|006000|2024-01-02 03:04:05 +0000');
    assert.throws(() => ops([opt('x', '%START_TIME(%Q)%')]), (e: unknown) => e instanceof ConfigError && /%Q/.test(e.message));
  });
  test('literal text around commands, several commands in one value', () => {
    assert.equal(one('for=%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%;proto=%PROTOCOL%'), 'for=10.1.2.3;proto=HTTP/1.1');
  });
  test('%% is a literal percent sign, also next to commands', () => {
    assert.equal(one('100%%'), '100%');
    assert.equal(one('%%%PROTOCOL%%%'), '%HTTP/1.1%');
    assert.equal(one('%%PROTOCOL%%'), '%PROTOCOL%', 'an escaped percent never starts a command');
  });
  test(':N truncates a command\'s value', () => {
    assert.equal(one('%REQ(user-agent):4%', record(), 'request', { 'user-agent': 'curl/8' }), 'curl');
  });
});

describe('header formatters: %REQ% and %RESP%', () => {
  test('request side: %REQ(x)% reads the request headers being edited', () => {
    assert.equal(one('%REQ(x-user)%', record(), 'request', { 'x-user': 'jason' }), 'jason');
    assert.equal(one('%REQ(X-User)%', record(), 'request', { 'x-user': 'jason' }), 'jason', 'names are case-insensitive');
  });
  test('request side: pseudo-headers come from the request', () => {
    assert.equal(one('%REQ(:AUTHORITY)% %REQ(:METHOD)% %REQ(:PATH)%'), 'reviews:9080 POST /api/v1?x=1');
  });
  test('alternatives: %REQ(a?b)%', () => {
    assert.equal(one('%REQ(x-a?x-b)%', record(), 'request', { 'x-b': 'b' }), 'b');
    assert.equal(one('%REQ(x-a?x-b)%', record(), 'request', { 'x-a': 'a', 'x-b': 'b' }), 'a');
  });
  test('a repeated header gives its first value (Envoy)', () => {
    assert.equal(one('%REQ(x-multi)%', record(), 'request', { 'x-multi': ['1', '2'] }), '1');
  });
  test('a later add sees an earlier one of the same ops', () => {
    const o = ops([opt('x-a', 'first'), opt('x-b', 'copy-%REQ(x-a)%')]);
    assert.deepEqual(run(o, {}, record()), { 'x-a': 'first', 'x-b': 'copy-first' });
  });
  test('a missing value formats as empty: the header is skipped unless keep_empty_value', () => {
    assert.deepEqual(run(ops([opt('x-out', '%REQ(x-missing)%')]), {}, record()), {});
    assert.deepEqual(run(ops([opt('x-out', '%REQ(x-missing)%', { keep_empty_value: true })]), {}, record()), { 'x-out': '' });
    assert.equal(one('[%REQ(x-missing)%]'), '[]', 'no "-" as in access logs');
  });
  test('response side: %RESP(x)% reads the response headers being edited, %REQ(x)% the request', () => {
    const rec = record({ headers: { 'x-request-id': 'rid-9' } });
    const o = ops([opt('x-echo', '%RESP(content-type)%|%REQ(x-request-id)%|%REQ(:METHOD)%')], 'response');
    assert.equal(run(o, { 'content-type': 'text/html' }, rec)['x-echo'], 'text/html|rid-9|POST');
  });
  test('%RESP(x)% on the request side is empty', () => {
    assert.equal(one('%RESP(content-type)%', record(), 'request', { 'content-type': 'x' }), undefined);
  });
});

describe('header formatters: upstream commands', () => {
  test('response side: %UPSTREAM_REMOTE_ADDRESS% and friends are the chosen upstream host', () => {
    const rec = record({ upstreamHost: '10.9.8.7:9080' });
    assert.equal(one('%UPSTREAM_REMOTE_ADDRESS%', rec, 'response'), '10.9.8.7:9080');
    assert.equal(one('%UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%:%UPSTREAM_REMOTE_PORT%', rec, 'response'), '10.9.8.7:9080');
    assert.equal(one('%UPSTREAM_HOST%', record({ upstreamHost: '[fd00::1]:80' }), 'response'), '[fd00::1]:80');
    assert.equal(one('%UPSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%', record({ upstreamHost: '[fd00::1]:80' }), 'response'), 'fd00::1');
  });
  test('request side: empty (Envoy formats request headers before it picks the host)', () => {
    assert.equal(one('%UPSTREAM_REMOTE_ADDRESS%', record({ upstreamHost: '10.9.8.7:9080' }), 'request'), undefined);
  });
});

describe('header formatters: compile once, literal fast path', () => {
  test('literal-only ops are not dynamic and need no context', () => {
    const o = ops([opt('x-a', 'plain'), opt('x-b', '100%%')]);
    assert.equal(o.dynamic, false);
    assert.ok(o.adds.every((a) => a.format === undefined));
    assert.deepEqual(run(o, {}), { 'x-a': 'plain', 'x-b': '100%' });
  });
  test('ops with a formatter are dynamic', () => {
    assert.equal(ops([opt('x-a', 'plain'), opt('x-b', '%PROTOCOL%')]).dynamic, true);
  });
  test('without a context, commands that need one give empty (the header is skipped); %REQ(x)% still reads the map', () => {
    assert.deepEqual(run(ops([opt('x-ip', '%DOWNSTREAM_REMOTE_ADDRESS%'), opt('x-copy', '%REQ(x-user)%')]), { 'x-user': 'u' }), { 'x-user': 'u', 'x-copy': 'u' });
  });
  test('local reply mappers (compileHeaderOpsFrom) are response side by default', () => {
    const o = compileHeaderOpsFrom(new Msg({ headers_to_add: [opt('x-ct', '%RESP(content-type)%')] }, 'mapper'), 'headers_to_add', 'headers_to_remove');
    assert.equal(run(o, { 'content-type': 'text/plain' }, record())['x-ct'], 'text/plain');
  });
  test('append actions apply to formatted values', () => {
    const o = ops([opt('x-forwarded-for', '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%')]);
    assert.deepEqual(run(o, { 'x-forwarded-for': '1.1.1.1' }, record())['x-forwarded-for'], ['1.1.1.1', '10.1.2.3']);
    const ow = ops([opt('x-ip', '%DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT%', { append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' })]);
    assert.equal(run(ow, { 'x-ip': 'spoofed' }, record())['x-ip'], '10.1.2.3');
  });
});

describe('header formatters: refused', () => {
  const refused = (value: string, re: RegExp): void => {
    assert.throws(() => ops([opt('x', value)]), (e: unknown) => {
      assert.ok(e instanceof ConfigError, String(e));
      assert.equal(e.path, 'route.request_headers_to_add[0].header.value');
      assert.match(e.message, re);
      return true;
    });
  };
  test('metadata and filter state commands', () => {
    refused('%UPSTREAM_METADATA(["istio","canonical_name"])%', /UPSTREAM_METADATA.*not supported/);
    refused('%DYNAMIC_METADATA(envoy.lb:x)%', /DYNAMIC_METADATA/);
    refused('%UPSTREAM_FILTER_STATE(k:PLAIN)%', /UPSTREAM_FILTER_STATE/);
  });
  test('unknown commands', () => refused('%NO_SUCH_THING%', /NO_SUCH_THING/));
  test('a stray % (Envoy: "Couldn\'t find valid command")', () => {
    refused('50%', /%%/);
    refused('%lower%', /position 0/);
  });
  test('%REQ()% needs a name', () => refused('%REQ()%', /header name/));
});

describe('format strings (shared with access logs)', () => {
  test('parseFormatString: literals, %% escapes, commands with args and max length', () => {
    assert.deepEqual(parseFormatString('a%%b %REQ(X?Y):5% %START_TIME(%s)%%%', 'f'), [
      'a%b ', { command: 'REQ', arg: 'X?Y', maxLength: 5 }, ' ', { command: 'START_TIME', arg: '%s', maxLength: 0 }, '%',
    ]);
  });
  test('access logs: %% before a command is unescaped, %START_TIME(fmt)% honours its format, new commands', () => {
    const e = record({ upstreamHost: '10.9.8.7:9080' });
    assert.equal(compileFormat('100%% %PROTOCOL%', 'f')(e), '100% HTTP/1.1');
    assert.equal(compileFormat('%START_TIME(%s)%', 'f')(e), String(Math.floor(START / 1000)));
    assert.equal(compileFormat('%DOWNSTREAM_LOCAL_PORT% %UPSTREAM_REMOTE_ADDRESS% %UPSTREAM_REMOTE_PORT%', 'f')(e), '15006 10.9.8.7:9080 9080');
  });
  test('compileTimeFormat: %f is nanoseconds (Skua keeps milliseconds)', () => {
    assert.equal(compileTimeFormat('%f', 'f')(START), '006000000');
    assert.equal(compileTimeFormat('%%%Y', 'f')(START), '%2024');
  });
});
