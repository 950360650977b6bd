/**
 * The floor under any Node.js proxy: a TCP relay that pairs each downstream connection with its own
 * upstream connection and pipes bytes both ways, with no HTTP parsing, routing or headers, only Node's
 * socket I/O. The L7 and L4 scenarios run it beside nginx and skua (target `node-relay`), so the report
 * shows how much of skua's cost per request any proxy on Node would pay.
 *   node bench/lib/node-relay.ts LISTEN_PORT UPSTREAM_PORT
 */
import net from 'node:net';

const [listenPort, upstreamPort] = process.argv.slice(2).map(Number);
if (!(listenPort > 0 && upstreamPort > 0)) {
  console.error('usage: node bench/lib/node-relay.ts LISTEN_PORT UPSTREAM_PORT');
  process.exit(2);
}

net.createServer({ noDelay: true }, (down) => {
  const up = net.connect({ host: '127.0.0.1', port: upstreamPort, noDelay: true });
  down.pipe(up);
  up.pipe(down);
  const close = (): void => { down.destroy(); up.destroy(); };
  down.on('error', close);
  up.on('error', close);
  down.on('close', close);
  up.on('close', close);
}).listen(listenPort, '127.0.0.1');

process.on('SIGTERM', () => process.exit(0));
