/**
 * What every sample app shares: where to listen (PORT, LISTEN_ADDR from the environment, so the same
 * files run under `./dev demo` and in compose.yaml) and a clean stop on SIGTERM/SIGINT.
 */
import type { Server as HttpServer } from 'node:http';
import type { Server as NetServer } from 'node:net';

export const PORT = Number(process.env.PORT ?? 9080);
export const LISTEN_ADDR = process.env.LISTEN_ADDR ?? '127.0.0.1';

export function serve(name: string, server: HttpServer | NetServer): void {
  server.listen(PORT, LISTEN_ADDR, () => console.log(`${name} listening on ${LISTEN_ADDR}:${PORT}`));
  const stop = (): void => {
    server.close(() => process.exit(0));
    if ('closeAllConnections' in server) server.closeAllConnections();
    setTimeout(() => process.exit(0), 1000).unref();
  };
  process.once('SIGTERM', stop);
  process.once('SIGINT', stop);
}
