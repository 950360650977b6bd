import { describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileHeaderOps, compileHeaderOpsFrom, HeaderOps, NO_HEADER_OPS } from '../src/http/header-ops.ts';

type Json = Record<string, unknown>;
type HeaderMap = Record<string, string | string[] | undefined>;

const ops = (add: Json[], remove: string[] = [], prefix: 'request' | 'response' = 'request'): HeaderOps =>
  compileHeaderOps(new Msg({ [`${prefix}_headers_to_add`]: add, [`${prefix}_headers_to_remove`]: remove }, 'route'), prefix);

const opt = (key: string, value: string, extra: Json = {}): Json => ({ header: { key, value }, ...extra });

function run(o: HeaderOps, headers: HeaderMap): HeaderMap {
  const copy: HeaderMap = { ...headers };
  o.apply(copy);
  return copy;
}

describe('header-ops: append actions', () => {
  const action = (a: string): HeaderOps => ops([opt('x-h', 'new', { append_action: a })]);

  test('APPEND_IF_EXISTS_OR_ADD: adds when absent, appends a value when present', () => {
    const o = action('APPEND_IF_EXISTS_OR_ADD');
    assert.deepEqual(run(o, {}), { 'x-h': 'new' });
    assert.deepEqual(run(o, { 'x-h': 'old' }), { 'x-h': ['old', 'new'] });
    assert.deepEqual(run(o, { 'x-h': ['a', 'b'] }), { 'x-h': ['a', 'b', 'new'] });
  });
  test('APPEND_IF_EXISTS_OR_ADD does not mutate a shared array value', () => {
    const shared = ['a'];
    run(action('APPEND_IF_EXISTS_OR_ADD'), { 'x-h': shared });
    assert.deepEqual(shared, ['a']);
  });
  test('ADD_IF_ABSENT: adds only when absent', () => {
    const o = action('ADD_IF_ABSENT');
    assert.deepEqual(run(o, {}), { 'x-h': 'new' });
    assert.deepEqual(run(o, { 'x-h': 'old' }), { 'x-h': 'old' });
    assert.deepEqual(run(o, { 'x-h': ['a', 'b'] }), { 'x-h': ['a', 'b'] });
  });
  test('OVERWRITE_IF_EXISTS_OR_ADD: always ends with exactly the new value', () => {
    const o = action('OVERWRITE_IF_EXISTS_OR_ADD');
    assert.deepEqual(run(o, {}), { 'x-h': 'new' });
    assert.deepEqual(run(o, { 'x-h': 'old' }), { 'x-h': 'new' });
    assert.deepEqual(run(o, { 'x-h': ['a', 'b'] }), { 'x-h': 'new' });
  });
  test('OVERWRITE_IF_EXISTS: only replaces an existing header', () => {
    const o = action('OVERWRITE_IF_EXISTS');
    assert.deepEqual(run(o, {}), {});
    assert.equal('x-h' in run(o, {}), false);
    assert.deepEqual(run(o, { 'x-h': 'old' }), { 'x-h': 'new' });
    assert.deepEqual(run(o, { 'x-h': ['a', 'b'], other: '1' }), { 'x-h': 'new', other: '1' });
  });
  test('the enum may be given by number', () => {
    assert.deepEqual(run(ops([opt('x-h', 'new', { append_action: 1 })]), { 'x-h': 'old' }), { 'x-h': 'old' });
    assert.deepEqual(run(ops([opt('x-h', 'new', { append_action: 3 })]), {}), {});
  });
  test('default (no append, no append_action) is APPEND_IF_EXISTS_OR_ADD', () => {
    assert.deepEqual(run(ops([opt('x-h', 'new')]), { 'x-h': 'old' }), { 'x-h': ['old', 'new'] });
  });
  test('unknown append_action is a ConfigError naming the field', () => {
    assert.throws(() => ops([opt('x-h', 'v', { append_action: 'REPLACE' })]), (err: unknown) => {
      assert.ok(err instanceof ConfigError);
      assert.equal(err.path, 'route.request_headers_to_add[0].append_action');
      assert.match(err.message, /REPLACE/);
      return true;
    });
  });
  test('adds run in order: a later add sees an earlier one', () => {
    const o = ops([opt('x-h', 'one'), opt('x-h', 'two', { append_action: 'ADD_IF_ABSENT' }), opt('x-h', 'three')]);
    assert.deepEqual(run(o, {}), { 'x-h': ['one', 'three'] });
  });
});

describe('header-ops: legacy append', () => {
  test('append: false overwrites', () => {
    assert.deepEqual(run(ops([opt('x-h', 'new', { append: false })]), { 'x-h': 'old' }), { 'x-h': 'new' });
    assert.deepEqual(run(ops([opt('x-h', 'new', { append: false })]), {}), { 'x-h': 'new' });
  });
  test('append: true appends', () => {
    assert.deepEqual(run(ops([opt('x-h', 'new', { append: true })]), { 'x-h': 'old' }), { 'x-h': ['old', 'new'] });
  });
  test('append as a BoolValue wrapper', () => {
    assert.deepEqual(run(ops([opt('x-h', 'new', { append: { value: false } })]), { 'x-h': 'old' }), { 'x-h': 'new' });
  });
  test('append must be a boolean', () => {
    assert.throws(() => ops([opt('x-h', 'new', { append: 'no' })]), { name: 'ConfigError', path: 'route.request_headers_to_add[0].append' });
  });
  // Regression (fixed in src/http/header-ops.ts compileAdd): Envoy's HeaderParser refuses a HeaderValueOption that sets
  // `append` and a non-default `append_action` ("Both append and append_action are set and it's not
  // allowed"); Skua silently lets append_action win.
  test('append together with a non-default append_action is refused', () => {
    assert.throws(() => ops([opt('x-h', 'v', { append: true, append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' })]), ConfigError);
  });
});

describe('header-ops: empty values', () => {
  test('an empty value is skipped by default, even by overwrite', () => {
    assert.deepEqual(run(ops([opt('x-h', '')]), {}), {});
    assert.deepEqual(run(ops([opt('x-h', '', { append_action: 'OVERWRITE_IF_EXISTS_OR_ADD' })]), { 'x-h': 'old' }), { 'x-h': 'old' });
  });
  test('keep_empty_value adds it', () => {
    assert.deepEqual(run(ops([opt('x-h', '', { keep_empty_value: true })]), {}), { 'x-h': '' });
    assert.deepEqual(run(ops([opt('x-h', '', { keep_empty_value: true, append_action: 'OVERWRITE_IF_EXISTS' })]), { 'x-h': 'old' }), { 'x-h': '' });
    assert.deepEqual(run(ops([opt('x-h', '', { keep_empty_value: true })]), { 'x-h': 'a' }), { 'x-h': ['a', ''] });
  });
  test('an absent value counts as empty', () => {
    assert.deepEqual(run(ops([{ header: { key: 'x-h' } }]), {}), {});
  });
});

describe('header-ops: keys, raw_value, removal', () => {
  test('keys are lower-cased', () => {
    assert.deepEqual(run(ops([opt('X-Custom-Header', 'v')]), {}), { 'x-custom-header': 'v' });
  });
  test('raw_value is base64 bytes', () => {
    assert.deepEqual(run(ops([{ header: { key: 'x-raw', raw_value: Buffer.from('bytes!').toString('base64') } }]), {}), { 'x-raw': 'bytes!' });
  });
  test('a key is required', () => {
    assert.throws(() => ops([{ header: { value: 'v' } }]), { name: 'ConfigError', path: 'route.request_headers_to_add[0].header.key' });
    assert.throws(() => ops([{ append: true }]), { name: 'ConfigError', path: 'route.request_headers_to_add[0].header' });
  });
  test('removal is case-insensitive and removes every value', () => {
    const o = ops([], ['X-Remove-Me', 'set-cookie']);
    assert.deepEqual(run(o, { 'x-remove-me': 'a', 'set-cookie': ['a', 'b'], keep: 'k' }), { keep: 'k' });
    assert.deepEqual(run(o, {}), {});
  });
  test('removal happens before additions (Envoy: remove-before-add)', () => {
    const o = ops([opt('x-h', 'new')], ['x-h']);
    assert.deepEqual(run(o, { 'x-h': 'old' }), { 'x-h': 'new' });
  });
  test('response_* fields are read separately from request_*', () => {
    const m = new Msg({ request_headers_to_add: [opt('req', '1')], response_headers_to_add: [opt('resp', '2')], response_headers_to_remove: ['gone'] }, 'vh');
    assert.deepEqual(run(compileHeaderOps(m, 'request'), { gone: 'x' }), { gone: 'x', req: '1' });
    assert.deepEqual(run(compileHeaderOps(m, 'response'), { gone: 'x' }), { resp: '2' });
  });
  test('nothing configured gives the shared empty ops', () => {
    assert.equal(ops([]), NO_HEADER_OPS);
    assert.equal(NO_HEADER_OPS.empty, true);
    assert.equal(ops([opt('a', 'b')]).empty, false);
    assert.equal(ops([], ['a']).empty, false);
  });
  test('compileHeaderOpsFrom reads any pair of fields', () => {
    const o = compileHeaderOpsFrom(new Msg({ headers_to_add: [opt('x', '1')], headers_to_remove: ['y'] }, 'mapper'), 'headers_to_add', 'headers_to_remove');
    assert.deepEqual(run(o, { y: 'gone' }), { x: '1' });
  });
  test('remove list entries must be strings', () => {
    assert.throws(() => ops([], [1 as unknown as string]), { name: 'ConfigError', path: 'route.request_headers_to_remove[0]' });
  });
});

describe('header-ops: formatters', () => {
  // Supported formatters (%DOWNSTREAM_REMOTE_ADDRESS%, %REQ(x)%, %START_TIME%, ...) are covered in header-formatters.test.ts.
  for (const value of ['%UPSTREAM_METADATA(["a","b"])%', 'a %PER_REQUEST_STATE(x)% b', '%NOT_A_COMMAND%']) {
    test(`${value} is refused with a clear error`, () => {
      assert.throws(() => ops([opt('x-h', value)]), (err: unknown) => {
        assert.ok(err instanceof ConfigError);
        assert.equal(err.path, 'route.request_headers_to_add[0].header.value');
        assert.match(err.message, /formatters/);
        assert.match(err.message, /not supported/);
        assert.ok(err.message.includes(value), 'the message quotes the value');
        return true;
      });
    });
  }
  test('refused formatters in raw_value are refused too', () => {
    const raw = Buffer.from('%UPSTREAM_METADATA(["a","b"])%').toString('base64');
    assert.throws(() => ops([{ header: { key: 'x', raw_value: raw } }]), { name: 'ConfigError', path: 'route.request_headers_to_add[0].header.value' });
  });
  // Regression (fixed in src/http/header-ops.ts): Envoy's header values are format strings in which `%%` is a literal
  // percent ("to emit a header with the value 100%, the custom header value in the Envoy configuration
  // must be 100%%"); Skua sends `100%%`.
  test('%% is a literal percent sign', () => {
    assert.deepEqual(run(ops([opt('x-discount', '100%%')]), {}), { 'x-discount': '100%' });
  });
});
