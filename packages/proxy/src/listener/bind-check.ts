/**
 * Checking that a listener can bind before its update is acknowledged (Envoy binds when it creates
 * the listener and NACKs "cannot bind"), and the address key listeners are compared by (Envoy
 * refuses a second listener on an address: "has duplicate address ... as existing listener").
 */
import { createServer } from 'node:net';
import { formatHostPort } from '../config/address.ts';
import type { ListenerConfig } from './config.ts';

/** strerror() texts Envoy prints for the usual bind failures. */
const STRERROR: Readonly<Record<string, string>> = {
  EADDRINUSE: 'Address already in use', EADDRNOTAVAIL: 'Cannot assign requested address', EACCES: 'Permission denied',
};

/** Envoy's message for a bind failure: `cannot bind '127.0.0.1:80': Address already in use`. */
export function bindError(config: ListenerConfig, err: Error): Error {
  const code = (err as NodeJS.ErrnoException).code ?? '';
  return new Error(`cannot bind '${formatHostPort(config.address.address, config.address.port)}': ${STRERROR[code] ?? err.message}`);
}

/**
 * The address a listener occupies, for duplicate checks; undefined when it cannot clash (an
 * internal listener is reached by name; a bound port 0 gets a port of its own).
 */
export function occupiedAddress(config: ListenerConfig): string | undefined {
  if (config.internal || (config.bindToPort && config.address.port === 0)) return undefined;
  return formatHostPort(config.address.address, config.address.port);
}

/**
 * Binds (and closes) a socket on the listener's address with the same options the listener will
 * use. A client that connects in between is dropped; closing frees the port at once (the close
 * callback would also wait for such connections, so it is not awaited).
 */
export function probeBind(config: ListenerConfig, reusePort: boolean): Promise<void> {
  return new Promise((resolve, reject) => {
    const server = createServer({ pauseOnConnect: true }, (socket) => socket.destroy());
    server.once('error', (e) => reject(bindError(config, e)));
    server.listen({ host: config.address.address, port: config.address.port, reusePort, backlog: 1 }, () => {
      server.close();
      resolve();
    });
  });
}
