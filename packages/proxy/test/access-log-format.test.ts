import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { compileFormat, compileJsonFormat, DEFAULT_FORMAT } from '../src/telemetry/format.ts';
import type { LogEntry } from '../src/telemetry/log-entry.ts';
import type { ConnInfo } from '../src/listener/conn-info.ts';
import { ConfigError } from '../src/core/errors.ts';

const CONN: ConnInfo = {
  id: 42, remoteAddress: '10.1.2.3', remotePort: 51000, localAddress: '10.0.0.9', localPort: 15006,
  originalDst: { address: '10.0.0.9', port: 9080 }, tls: true, serverName: 'reviews.default.svc', alpn: 'h2', peerUriSans: [], filterState: undefined, startTime: 0,
};

/** The request from Envoy's documented default-format example. */
type H = Record<string, string | undefined>;
function entry(over: Partial<LogEntry> = {}, req: H = {}, resp: H = {}): LogEntry {
  const reqHeaders: H = {
    ':method': 'POST', ':path': '/api/v1/locations', ':authority': 'locations',
    'x-forwarded-for': '10.0.35.28', 'user-agent': 'nsq2http', 'x-request-id': 'cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2', ...req,
  };
  const respHeaders: H = { 'x-envoy-upstream-service-time': '100', ...resp };
  return {
    startTime: Date.UTC(2016, 3, 15, 20, 17, 0, 310), protocol: 'HTTP/2', status: 204, flags: '-', details: 'via_upstream',
    bytesReceived: 154, bytesSent: 0, durationMs: 226, upstreamHost: '10.0.2.1:80', upstreamCluster: 'locations_cluster', upstreamLocalAddress: '10.0.1.7:40200',
    routeName: 'default_route', conn: CONN,
    requestHeader: (n) => reqHeaders[n],
    responseHeader: (n) => respHeaders[n],
    ...over,
  };
}

const fmt = (format: string, e: LogEntry = entry()): string => compileFormat(format, 'test.format')(e);

function configError(fn: () => unknown, path: string, message: RegExp): void {
  assert.throws(fn, (err: unknown) => {
    assert.ok(err instanceof ConfigError, `expected ConfigError, got ${String(err)}`);
    assert.equal(err.path, path);
    assert.match(err.message, message);
    return true;
  });
}

describe('default access log format', () => {
  test('is Envoy\'s documented default', () => {
    assert.equal(DEFAULT_FORMAT,
      '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" ' +
      '%RESPONSE_CODE% %RESPONSE_FLAGS% %BYTES_RECEIVED% %BYTES_SENT% %DURATION% ' +
      '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" ' +
      '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%"\n');
  });
  test('renders Envoy\'s documented example line', () => {
    assert.equal(fmt(DEFAULT_FORMAT),
      '[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 204 - 154 0 226 100 "10.0.35.28" ' +
      '"nsq2http" "cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "10.0.2.1:80"\n');
  });
  test('missing values print as -, a missing response as code 0', () => {
    const e = entry({ status: 0, flags: 'UH', upstreamHost: '', durationMs: 1, bytesReceived: 0 },
      { 'x-forwarded-for': undefined, 'user-agent': undefined }, { 'x-envoy-upstream-service-time': undefined });
    assert.equal(fmt(DEFAULT_FORMAT, e),
      '[2016-04-15T20:17:00.310Z] "POST /api/v1/locations HTTP/2" 0 UH 0 0 1 - "-" "-" ' +
      '"cc21d9b0-cf5c-432b-8c7e-98aeb7988cd2" "locations" "-"\n');
  });
  test('the original path wins over :path when x-envoy-original-path is set', () => {
    const e = entry({}, { ':path': '/rewritten', 'x-envoy-original-path': '/original' });
    assert.match(fmt(DEFAULT_FORMAT, e), /"POST \/original HTTP\/2"/);
  });
});

describe('command operators', () => {
  test('REQ(X?Y): X when present, else Y, else -', () => {
    assert.equal(fmt('%REQ(X-A?X-B)%', entry({}, { 'x-a': 'a', 'x-b': 'b' })), 'a');
    assert.equal(fmt('%REQ(X-A?X-B)%', entry({}, { 'x-b': 'b' })), 'b');
    assert.equal(fmt('%REQ(X-A?X-B)%', entry()), '-');
  });
  test('RESP(X?Y) falls back the same way', () => {
    assert.equal(fmt('%RESP(X-A?CONTENT-TYPE)%', entry({}, {}, { 'content-type': 'text/plain' })), 'text/plain');
    assert.equal(fmt('%RESP(NOPE)%'), '-');
  });
  test('header names are case-insensitive', () => {
    assert.equal(fmt('%REQ(User-Agent)%|%REQ(user-agent)%|%REQ(:Authority)%'), 'nsq2http|nsq2http|locations');
  });
  test('max length: %REQ(USER-AGENT):5% truncates', () => {
    const e = entry({}, { 'user-agent': 'Mozilla/5.0 (X11)' });
    assert.equal(fmt('%REQ(USER-AGENT):5%', e), 'Mozil');
    assert.equal(fmt('%REQ(USER-AGENT):100%', e), 'Mozilla/5.0 (X11)');
    assert.equal(fmt('%REQ(X-MISSING):5%', e), '-');
    assert.equal(fmt('[%REQ(X-REQUEST-ID):8%]'), '[cc21d9b0]');
  });
  test('literal text around and between commands is kept', () => {
    assert.equal(fmt('code=%RESPONSE_CODE%%RESPONSE_FLAGS% proto=%PROTOCOL% end'), 'code=204- proto=HTTP/2 end');
    assert.equal(fmt('no commands at all'), 'no commands at all');
    assert.equal(fmt(''), '');
  });
  test('connection and upstream commands', () => {
    assert.equal(fmt('%DOWNSTREAM_REMOTE_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS_WITHOUT_PORT% %DOWNSTREAM_LOCAL_ADDRESS%'),
      '10.1.2.3:51000 10.1.2.3 10.0.0.9:15006');
    assert.equal(fmt('%REQUESTED_SERVER_NAME% %CONNECTION_ID% %UPSTREAM_CLUSTER% %ROUTE_NAME% %RESPONSE_CODE_DETAILS%'),
      'reviews.default.svc 42 locations_cluster default_route via_upstream');
    const v6 = entry({ conn: { ...CONN, remoteAddress: '::1', remotePort: 5000 } });
    assert.equal(fmt('%DOWNSTREAM_REMOTE_ADDRESS%', v6), '[::1]:5000');
    assert.equal(fmt('%UPSTREAM_TRANSPORT_FAILURE_REASON%'), '-');
  });
  test('START_TIME is ISO 8601 UTC with milliseconds', () => {
    assert.equal(fmt('%START_TIME%', entry({ startTime: Date.UTC(2024, 0, 2, 3, 4, 5, 6) })), '2024-01-02T03:04:05.006Z');
  });
  // Regression (fixed in src/telemetry/format.ts DURATION): Envoy prints whole milliseconds by truncation
  // (duration_cast<milliseconds>); Skua rounds, so 12.7 ms prints 13.
  test('DURATION truncates to whole milliseconds', () => {
    assert.equal(fmt('%DURATION%', entry({ durationMs: 12.2 })), '12');
    assert.equal(fmt('%DURATION%', entry({ durationMs: 12.7 })), '12');
  });
  test('unknown commands are ConfigErrors naming the command and the field', () => {
    configError(() => compileFormat('a %NOT_A_COMMAND% b', 'access_log[0].typed_config.log_format.text_format'),
      'access_log[0].typed_config.log_format.text_format', /NOT_A_COMMAND/);
    configError(() => compileFormat('%REQ()%', 'f'), 'f', /header name/);
    configError(() => compileFormat('%DYNAMIC_METADATA(istio.mixer:x)%', 'f'), 'f', /DYNAMIC_METADATA/);
  });
});

describe('json_format', () => {
  const json = (fields: Record<string, unknown>, e: LogEntry = entry()): Record<string, unknown> => {
    const line = compileJsonFormat(fields, 'log_format.json_format')(e);
    assert.ok(line.endsWith('\n'), 'one JSON object per line');
    assert.equal(line.indexOf('\n'), line.length - 1);
    return JSON.parse(line) as Record<string, unknown>;
  };
  test('string commands, missing values as null, literal text kept', () => {
    const out = json({ method: '%REQ(:METHOD)%', path: '%REQ(X-ENVOY-ORIGINAL-PATH?:PATH)%', ua: '%REQ(X-NOPE)%', tag: 'static', mix: 'code=%RESPONSE_CODE%' });
    assert.deepEqual(out, { method: 'POST', path: '/api/v1/locations', ua: null, tag: 'static', mix: 'code=204' });
  });
  test('values are JSON-escaped', () => {
    const out = json({ ua: '%REQ(USER-AGENT)%' }, entry({}, { 'user-agent': 'evil "quoted" \\ \n agent' }));
    assert.equal(out.ua, 'evil "quoted" \\ \n agent');
  });
  test('max length works inside json_format', () => {
    assert.deepEqual(json({ ua: '%REQ(USER-AGENT):3%' }), { ua: 'nsq' });
  });
  test('non-string values are refused with the key path', () => {
    configError(() => compileJsonFormat({ nested: { a: '%PROTOCOL%' } }, 'log_format.json_format'), 'log_format.json_format.nested', /nested/);
    configError(() => compileJsonFormat({ n: 1 }, 'log_format.json_format'), 'log_format.json_format.n', /non-string/);
  });
  test('unknown commands name the key path', () => {
    configError(() => compileJsonFormat({ x: '%BOGUS%' }, 'log_format.json_format'), 'log_format.json_format.x', /BOGUS/);
  });
  // Regression (fixed in src/telemetry/format.ts compileJsonFormat): Envoy's json_format renders "values as strings,
  // numbers, or boolean values as appropriate" (SubstitutionFormatString docs: status:
  // "%RESPONSE_CODE%" gives {"status": 500}); Skua writes every value as a string ("204").
  test('numeric commands are JSON numbers', () => {
    const out = json({ code: '%RESPONSE_CODE%', rx: '%BYTES_RECEIVED%', tx: '%BYTES_SENT%', ms: '%DURATION%' });
    assert.deepEqual(out, { code: 204, rx: 154, tx: 0, ms: 226 });
  });
});
