// The one IPv4-mapped-address canonicaliser: every spelling of a mapped address becomes the
// dotted quad, everything else is left alone; canonicalIpText also spells IPv6 one way and refuses
// what is not an address; and a real dual-stack socket's IPv4 peer comes
// through the listener as IPv4 (source and destination), as Envoy reports it.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, connect, type Socket } from 'node:net';
import { canonicalIp, canonicalIpText } from '../src/core/canonical-ip.ts';
import { originalDestination } from '../src/sys/sockopt.ts';

test('mapped spellings become IPv4; anything else is unchanged', () => {
  for (const s of ['::ffff:10.0.0.1', '::FFFF:10.0.0.1', '::ffff:a00:1', '::ffff:0a00:0001', '0:0:0:0:0:ffff:10.0.0.1', '0:0:0:0:0:FFFF:a00:1']) {
    assert.equal(canonicalIp(s), '10.0.0.1', s);
  }
  for (const s of ['10.0.0.1', '::1', '2001:db8::ffff:1', 'fe80::ffff:ffff:ffff:ffff', '::', '', 'envoy://internal/', 'example.com', '::ffff']) {
    assert.equal(canonicalIp(s), s, s);
  }
});

test('canonicalIpText: one spelling per address, undefined for what is not one', () => {
  const cases: Array<[string, string | undefined]> = [
    ['10.0.0.1', '10.0.0.1'], ['::ffff:10.0.0.1', '10.0.0.1'], ['0:0:0:0:0:FFFF:a00:1', '10.0.0.1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'], ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], ['::', '::'], ['::1', '::1'], ['fe80::0001', 'fe80::1'],
    ['', undefined], ['example.com', undefined], ['10.0.0', undefined], ['010.0.0.1', undefined], ['10.0.0.256', undefined],
    ['fe80::1%eth0', undefined], ['1::2::3', undefined], ['[::1]', undefined], ['::ffff', '::ffff'], ['::FFFF:0:1', '0.0.0.1'],
  ];
  for (const [text, want] of cases) assert.equal(canonicalIpText(text), want, text);
});

test("a dual-stack listener's IPv4 peer: both ends canonical", async () => {
  const seen = await new Promise<{ remote: string; local: string; dst: string; family: string }>((resolve, reject) => {
    const server = createServer((s: Socket) => {
      const dst = originalDestination(s);
      resolve({ remote: canonicalIp(s.remoteAddress ?? ''), local: canonicalIp(s.localAddress ?? ''), dst: dst.address, family: dst.family });
      s.destroy();
      server.close();
    });
    server.on('error', reject);
    server.listen({ host: '::', port: 0, ipv6Only: false }, () => {
      const c = connect({ host: '127.0.0.1', port: (server.address() as { port: number }).port });
      c.on('error', () => { /* closed by the server */ });
    });
  });
  assert.deepEqual(seen, { remote: '127.0.0.1', local: '127.0.0.1', dst: '127.0.0.1', family: 'IPv4' });
});
