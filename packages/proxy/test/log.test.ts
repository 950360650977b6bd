// core/log.ts and core/log-format.ts: spdlog patterns as Envoy's --log-format reads them, Envoy's
// component names and error texts for --component-log-level, per-logger thresholds, and the admin
// /logging forms (level=, <name>=, paths=).
import { afterEach, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { compileLogFormat, DEFAULT_LOG_FORMAT, formatLine, ISTIO_JSON_LOG_FORMAT, ISTIO_LOG_FORMAT } from '../src/core/log-format.ts';
import { adminLogging, logger, loggerLevels, setComponentLogLevels, setLogFormat, setLogLevel, setLogSink } from '../src/core/log.ts';
import { explainError } from '../src/core/explain-error.ts';

const AT = Date.UTC(2026, 10, 25, 3, 4, 5, 67);
const rec = (message: string, logger = 'upstream') => ({ levelName: 'warning', letter: 'W', logger, message, epochMs: AT });

describe('log format patterns', () => {
  test('Envoy\'s default (less the source location)', () => {
    assert.equal(formatLine(compileLogFormat(DEFAULT_LOG_FORMAT), rec('hello')), `[2026-11-25 03:04:05.067][${process.pid}][warning][upstream] hello`);
  });

  test('every time flag, %L, %P, %% and text around them', () => {
    const line = formatLine(compileLogFormat('%Y|%y|%m|%d|%H|%M|%S|%e|%f|%F|%T|%D|%z|%L|%P|100%%'), rec('x'));
    assert.equal(line, `2026|26|11|25|03|04|05|067|067000|067000000|03:04:05|11/25/26|+00:00|W|${process.pid}|100%`);
  });

  test('%j makes a JSON string body; Istio\'s JSON format parses', () => {
    const msg = 'a "quoted"\nline\twith \\ and \u0001';
    const parsed = JSON.parse(formatLine(compileLogFormat(ISTIO_JSON_LOG_FORMAT), rec(msg))) as Record<string, string>;
    assert.deepEqual(parsed, { level: 'warning', time: '2026-11-25T03:04:05.067000Z', scope: 'envoy upstream', msg });
  });

  test('%_ and --log-format-escaped escape control characters; %v does not', () => {
    assert.equal(formatLine(compileLogFormat('%_'), rec('a\nb')), 'a\\nb');
    assert.equal(formatLine(compileLogFormat('%v', true), rec('a\nb "c"')), 'a\\nb "c"');
    assert.equal(formatLine(compileLogFormat('%v'), rec('a\nb')), 'a\nb');
  });

  test('Istio\'s text format; unknown flags and a trailing % stay as they are; %g/%# print nothing', () => {
    assert.equal(formatLine(compileLogFormat(ISTIO_LOG_FORMAT), rec('m')), '2026-11-25T03:04:05.067000Z\twarning\tenvoy upstream\tm');
    assert.equal(formatLine(compileLogFormat('%Q %v%'), rec('m')), '%Q m%');
    assert.equal(formatLine(compileLogFormat('[%g:%#] %v'), rec('m')), '[:] m');
  });
});

describe('loggers', () => {
  const lines: string[] = [];
  let prevSink: ((line: string) => void) | undefined;
  afterEach(() => {
    if (prevSink) setLogSink(prevSink);
    setLogLevel('info');
    setLogFormat(DEFAULT_LOG_FORMAT);
    lines.length = 0;
  });
  const capture = (): void => { prevSink = setLogSink((l) => { lines.push(l); }); };

  test('-l sets every logger; --component-log-level overrides some; the guards follow', () => {
    capture();
    setLogFormat('%n %l %v');
    assert.equal(setLogLevel('warn'), true);
    assert.equal(setComponentLogLevels('upstream:debug, http:trace'), undefined);
    const up = logger('upstream'), http = logger('http'), router = logger('router');
    assert.deepEqual([up.debugOn, up.traceOn, http.traceOn, router.debugOn], [true, false, true, false]);
    up.debug('u1'); up.trace('u2'); http.trace('h1'); router.info('r1'); router.warn('r2');
    assert.deepEqual(lines, ['upstream debug u1\n', 'http trace h1\n', 'router warning r2\n']);
    assert.equal(setLogLevel('loud'), false);
  });

  test('Envoy\'s errors for a bad --component-log-level, and nothing changes', () => {
    setLogLevel('info');
    assert.equal(setComponentLogLevels('upstream:debug,nosuch:debug'), "error: invalid component specified 'nosuch'");
    assert.equal(setComponentLogLevels('upstream:chatty'), "error: invalid log level specified 'chatty'");
    assert.equal(setComponentLogLevels('upstream'), "error: component log level not correctly specified 'upstream'");
    assert.equal(logger('upstream').level(), 'info');
  });

  test('/logging: level=, <name>=, paths=; unknown names are 404', () => {
    assert.equal(adminLogging(new URLSearchParams('level=error')).status, 200);
    assert.ok(loggerLevels().every(([, l]) => l === 'error'));
    const one = adminLogging(new URLSearchParams('pool=debug'));
    assert.match(one.body, / {2}pool: debug\n/);
    assert.match(one.body, / {2}router: error\n/);
    assert.match(adminLogging(new URLSearchParams('paths=router:trace,dns:warning')).body, / {2}dns: warning\n[\s\S]* {2}router: trace\n/);
    assert.equal(adminLogging(new URLSearchParams('nosuch=debug')).status, 404);
    assert.equal(adminLogging(new URLSearchParams('level=loud')).status, 404);
  });
});

describe('start-up errors in one line', () => {
  const sys = (code: string, extra: Record<string, unknown>): Error => Object.assign(new Error(`${code}: raw`), { code, ...extra });
  test('the common system errors say what to do', () => {
    assert.match(explainError(sys('EADDRINUSE', { syscall: 'listen', address: '0.0.0.0', port: 15001 })), /cannot listen on 0\.0\.0\.0:15001: the address is already in use; stop what holds it \(ss -ltnp 'sport = :15001'\)/);
    assert.match(explainError(sys('EACCES', { syscall: 'listen', address: '0.0.0.0', port: 80 })), /ports below 1024 need root or CAP_NET_BIND_SERVICE/);
    assert.match(explainError(sys('EACCES', { syscall: 'open', path: '/etc/x' })), /cannot open \/etc\/x: permission denied for uid \d+/);
    assert.match(explainError(sys('EADDRNOTAVAIL', { syscall: 'listen', address: '10.9.9.9', port: 1 })), /not on any interface of this machine/);
    assert.match(explainError(sys('ENOENT', { syscall: 'open', path: '/nope' })), /cannot open \/nope: no such file or directory; check the path/);
  });
  test('grpc-js\'s bind failure text is read as the system error it wraps', () => {
    assert.match(explainError(new Error('No address added out of total 1 resolved errors: [listen EADDRINUSE: address already in use 127.0.0.1:15010]')),
      /^cannot listen on 127\.0\.0\.1:15010: the address is already in use/);
  });
  test('anything else: the first line of the message', () => {
    assert.equal(explainError(new Error('first\nsecond')), 'first');
  });
});
