// The gRPC interop suite through skua-proxy: grpc-go's standard interop client and server
// (google.golang.org/grpc/interop/{client,server}, built by scripts/go-tools.sh) with the proxy in
// between on an HTTP/2 upstream. The 14 standard cases that need no credentials must all pass.
import { after, before, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { connect } from 'node:net';
import { cleanup, freePort, startProxy, type RunningProxy } from './lib/proxy.ts';
import { bootstrap, chain, cluster, hcm, listener, routeTo, vhost } from './lib/config.ts';
import { run, sleep } from './lib/client.ts';
import { goTool } from './lib/go-tools.ts';

const CASES = [
  'empty_unary', 'large_unary', 'client_streaming', 'server_streaming', 'ping_pong', 'empty_stream',
  'timeout_on_sleeping_server', 'cancel_after_begin', 'cancel_after_first_response', 'status_code_and_message',
  'special_status_message', 'unimplemented_method', 'unimplemented_service', 'custom_metadata',
] as const;

async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    const up = await new Promise<boolean>((resolve) => {
      const s = connect(port, '127.0.0.1');
      s.once('connect', () => { s.destroy(); resolve(true); });
      s.once('error', () => resolve(false));
    });
    if (up) return;
    await sleep(100);
  }
  throw new Error(`nothing listens on ${port}`);
}

describe('gRPC interop suite (grpc-go client → skua → grpc-go server)', { timeout: 240_000 }, () => {
  let client = '', skip = '', server: ChildProcess | undefined, proxy: RunningProxy;
  const passed: string[] = [];

  before(async () => {
    const c = await goTool('grpc-interop-client');
    const s = await goTool('grpc-interop-server');
    if ('skip' in c) { skip = c.skip; return; }
    if ('skip' in s) { skip = s.skip; return; }
    client = c.path;
    const port = await freePort();
    server = spawn(s.path, [`--port=${port}`], { stdio: ['ignore', 'ignore', 'pipe'] });
    server.stderr?.resume();
    await waitForPort(port, 10_000);
    proxy = await startProxy((p) => bootstrap(
      [listener(p('grpc'), [chain(hcm([vhost([routeTo('interop', '/')])], { statPrefix: 'interop' }))])],
      [cluster('interop', [port], { http2: true })],
    ), { ports: ['grpc'] });
  });
  after(async () => {
    if (!skip) console.log(`# gRPC interop through skua: ${passed.length}/${CASES.length} passed`);
    await cleanup(() => proxy?.stop(), () => {
      if (server && server.exitCode === null) { server.kill('SIGTERM'); return new Promise((r) => server?.once('exit', r)); }
    });
  });

  for (const name of CASES) {
    test(name, async (t) => {
      if (skip) { t.skip(skip); return; }
      const r = await run(client, ['--server_host=127.0.0.1', `--server_port=${proxy.ports.grpc}`, `--test_case=${name}`], 60_000);
      assert.equal(r.code, 0, `${name}: ${(r.stderr + r.stdout).slice(-1500)}`);
      passed.push(name);
    });
  }

  test('every call went through the proxy', async (t) => {
    if (skip) { t.skip(skip); return; }
    assert.ok(((await proxy.stat('http.interop.downstream_rq_http2_total')) ?? 0) >= CASES.length);
    assert.ok(((await proxy.stat('cluster.interop.upstream_rq_total')) ?? 0) >= CASES.length);
  });
});
