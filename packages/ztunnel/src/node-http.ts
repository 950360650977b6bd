/**
 * node:http through require(), not `import`: an ES import of node:http evaluates every export, and
 * its WebSocket / MessageEvent / CloseEvent getters load Node's bundled undici (a 745 KB source,
 * ~10 MB of memory for the life of the process) that ztunnel never uses. Types come from
 * `import type`, which leaves nothing behind.
 */
import { createRequire } from 'node:module';

const http = createRequire(import.meta.url)('node:http') as typeof import('node:http');

export const { createServer, STATUS_CODES } = http;
