import type { TerminalConfig } from '../listener/terminal.ts';
import type { HboneServer } from './server.ts';

/**
 * An HBONE server as a listener terminal: the listener core accepts (overload checks, stats,
 * original_dst), the server runs mTLS and HTTP/2; draining the listener sends GOAWAY.
 */
export function hboneTerminal(server: HboneServer): TerminalConfig {
  return {
    kind: 'hbone',
    live: () => ({
      onConnection: (socket) => server.handle(socket),
      drain: () => { void server.close(); },
      close: () => server.destroy(),
    }),
  };
}
