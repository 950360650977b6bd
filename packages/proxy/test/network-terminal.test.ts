// Listener terminals are registrations: HCM and tcp_proxy are two, a test registers a third and
// serves real connections with it (from Envoy JSON, after a network RBAC read filter, and from a
// listener built in code, and on a server the program bound itself), and the listener drives it
// only through the LiveTerminal interface.
import { after, describe, test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, createServer, type AddressInfo, type Socket } from 'node:net';
import { once } from 'node:events';
import { Msg } from '../src/config/fields.ts';
import { ConfigError } from '../src/core/errors.ts';
import { compileListener, plainListener } from '../src/listener/config.ts';
import { ActiveListener } from '../src/listener/active.ts';
import { networkTerminal, registerNetworkTerminal, type LiveTerminal, type NetworkTerminalExtension, type TerminalScope } from '../src/listener/terminal.ts';
import type { ConnInfo } from '../src/listener/conn-info.ts';
import { ClusterManager } from '../src/upstream/manager.ts';
import { StatsStore } from '../src/stats/store.ts';
import { HCM_TERMINAL } from '../src/filters/network/http_connection_manager/terminal.ts';
import { TCP_PROXY_TERMINAL } from '../src/filters/network/tcp_proxy/terminal.ts';

const ECHO_URL = 'type.googleapis.com/test.skua.Echo';

/** What the echo terminal saw, for assertions. */
const seen = { connections: [] as ConnInfo[], rejected: [] as ConnInfo[], drains: 0, closes: 0, scopes: [] as TerminalScope[] };

/** A third terminal: answers every byte with `prefix` + the bytes, until the client ends. */
const ECHO: NetworkTerminalExtension = {
  typeUrl: ECHO_URL,
  legacyName: 'test.echo',
  compile(m) {
    m.onlyFields(['@type', 'prefix']);
    const prefix = m.requiredStr('prefix');
    return {
      kind: 'echo',
      live(scope): LiveTerminal {
        seen.scopes.push(scope);
        return {
          onConnection(socket: Socket, info: ConnInfo) {
            seen.connections.push(info);
            socket.on('data', (b: Buffer) => socket.write(Buffer.concat([Buffer.from(prefix), b])));
            socket.on('end', () => socket.end());
            socket.resume();
          },
          rejected(info) { seen.rejected.push(info); },
          drain() { seen.drains++; },
          close() { seen.closes++; },
        };
      },
    };
  },
};
registerNetworkTerminal(ECHO);

const store = new StatsStore();
const clusters = new ClusterManager(store);
const open: ActiveListener[] = [];
after(() => { for (const l of open) l.close(); });

function listenerJson(filters: unknown[], name = 'echo'): Msg {
  return new Msg({ name, address: { socket_address: { address: '127.0.0.1', port_value: 0 } }, filter_chains: [{ filters }] }, 'listener');
}

async function start(l: ActiveListener): Promise<number> {
  open.push(l);
  await l.listen(false);
  return l.boundPort;
}

/** Sends `text`, half-closes, returns everything the server answered. */
async function exchange(port: number, text: string): Promise<string> {
  const c = connect({ host: '127.0.0.1', port });
  await once(c, 'connect');
  c.end(text);
  const chunks: Buffer[] = [];
  c.on('data', (b: Buffer) => chunks.push(b));
  await once(c, 'close');
  return Buffer.concat(chunks).toString();
}

describe('network terminals', () => {
  test('HCM and tcp_proxy are registrations, by type URL and by legacy name', () => {
    // Loading the listener compiler loads the extension registry; each terminal's module loads when
    // a config first uses it (load-on-use.test.ts), the registration standing in for it until then.
    for (const t of [HCM_TERMINAL, TCP_PROXY_TERMINAL]) {
      assert.equal(networkTerminal(t.typeUrl)?.legacyName, t.legacyName);
      assert.equal(networkTerminal(t.legacyName!), networkTerminal(t.typeUrl));
    }
    assert.throws(() => registerNetworkTerminal({ ...ECHO, typeUrl: HCM_TERMINAL.typeUrl }), /already registered/);
    registerNetworkTerminal(ECHO); // the same registration again is harmless
  });

  test('a third terminal from Envoy JSON serves real connections, after the read filters', async () => {
    const cfg = compileListener(listenerJson([
      { name: 'envoy.filters.network.rbac', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC', stat_prefix: 'r',
        rules: { action: 'DENY', policies: { deny_port: { permissions: [{ destination_port: 1 }], principals: [{ any: true }] } } } } },
      { name: 'echo', typed_config: { '@type': 'type.googleapis.com/udpa.type.v1.TypedStruct', type_url: 'test.skua.Echo', value: { prefix: '>' } } },
    ]), 0);
    assert.equal(cfg.chains.select({ destinationIp: '127.0.0.1', destinationPort: 1, directSourceIp: '127.0.0.1', sourceIp: '127.0.0.1', sourcePort: 1,
      serverName: '', transportProtocol: '', applicationProtocols: [] })?.terminal.kind, 'echo');
    const l = new ActiveListener(cfg, clusters, store);
    const port = await start(l);
    const before = seen.connections.length;
    assert.equal(await exchange(port, 'hello'), '>hello');
    assert.equal(seen.connections.length, before + 1);
    assert.equal(seen.connections.at(-1)?.localPort, port, 'the terminal gets the ConnInfo the listener built');
    assert.equal(seen.scopes.at(-1)?.drainManager, l.drainManager, "the listener's drain manager is in scope");
    // An update drains the old chain's terminal; close() closes the new one.
    const drains = seen.drains;
    l.update(compileListener(listenerJson([{ name: 'test.echo', typed_config: { '@type': ECHO_URL, prefix: '#' } }]), 0));
    assert.equal(seen.drains, drains + 1);
    assert.equal(await exchange(port, 'x'), '#x', 'the legacy name finds the terminal too');
  });

  test('a read filter that closes the connection: the terminal hears rejected(), never onConnection()', async () => {
    const cfg = compileListener(listenerJson([
      { name: 'envoy.filters.network.rbac', typed_config: { '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC', stat_prefix: 'r',
        rules: { action: 'DENY', policies: { all: { permissions: [{ any: true }], principals: [{ any: true }] } } } } },
      { name: 'echo', typed_config: { '@type': ECHO_URL, prefix: '>' } },
    ]), 0);
    const port = await start(new ActiveListener(cfg, clusters, store));
    const [c, r] = [seen.connections.length, seen.rejected.length];
    assert.equal(await exchange(port, 'hello'), '');
    assert.deepEqual([seen.connections.length, seen.rejected.length], [c, r + 1]);
  });

  test('a listener built in code runs the same terminal (no Envoy JSON)', async () => {
    const terminal = ECHO.compile(new Msg({ prefix: 'plain:' }, 'echo'));
    const l = new ActiveListener(plainListener({ name: 'zt-inbound', address: '127.0.0.1', port: 0, terminal, direction: 'INBOUND' }), clusters, store);
    const port = await start(l);
    assert.equal(await exchange(port, 'abc'), 'plain:abc');
    assert.equal(seen.scopes.at(-1)?.direction, 'INBOUND');
    const closes = seen.closes;
    l.close();
    assert.equal(seen.closes, closes + 1);
  });

  test('listenOn: a server the program bound itself (as in another namespace) runs the same listener core', async () => {
    const server = createServer({ allowHalfOpen: true, pauseOnConnect: true });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    const l = new ActiveListener(plainListener({ name: 'adopted', address: '127.0.0.1', port: 0, terminal: ECHO.compile(new Msg({ prefix: 'adopted:' }, 'echo')), statPrefix: 'adopted' }), clusters, store);
    open.push(l);
    l.listenOn(server);
    assert.throws(() => l.listenOn(server), /already listening/);
    assert.equal(l.boundPort, port);
    assert.equal(await exchange(port, 'x'), 'adopted:x');
    assert.equal(seen.connections.at(-1)?.localPort, port);
    assert.equal(store.find('counters', 'listener.adopted.downstream_cx_total')?.value, 1);
    l.drain();
    await once(server, 'close');
    await assert.rejects(exchange(port, 'y'), /ECONNREFUSED/, 'drain closed the adopted server');
  });

  test("config errors name the field: the terminal's own, a terminal not last, no terminal", () => {
    assert.throws(() => compileListener(listenerJson([{ name: 'e', typed_config: { '@type': ECHO_URL, prefx: 'x' } }]), 0),
      (e: unknown) => e instanceof ConfigError && /prefx/.test(e.message));
    assert.throws(() => compileListener(listenerJson([{ name: 'e', typed_config: { '@type': ECHO_URL, prefix: 'x' } },
      { name: 'e2', typed_config: { '@type': ECHO_URL, prefix: 'y' } }]), 0),
    (e: unknown) => e instanceof ConfigError && e.path === 'listener.filter_chains[0].filters[0]' && /must be last/.test(e.message));
    assert.throws(() => compileListener(listenerJson([{ name: 'envoy.filters.network.rbac', typed_config: {
      '@type': 'type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC', stat_prefix: 'r' } }]), 0),
    (e: unknown) => e instanceof ConfigError && /http_connection_manager or tcp_proxy or test\.echo/.test(e.message));
  });
});
