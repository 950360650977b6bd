/**
 * "reviews" (after Istio's Bookinfo): GET /reviews/<id> → JSON. v1 has no ratings, v2 has star
 * ratings. Every answer carries `x-reviews-version`, which the demo counts to show the traffic split,
 * and echoes the `x-request-id` it was sent. Behind a sidecar with mTLS, `peer` in the body is the
 * `x-forwarded-client-cert` the sidecar added: who called, by SPIFFE id.
 */
import { createServer } from 'node:http';
import { hostname } from 'node:os';
import { serve } from './common.ts';

const VERSION = process.env.SERVICE_VERSION ?? 'v1';
const REVIEWS = [
  { reviewer: 'Reviewer1', text: 'An extremely entertaining play by Shakespeare. The slapstick humour is refreshing!', stars: 5 },
  { reviewer: 'Reviewer2', text: 'Absolutely fun and entertaining. The play lacks thematic depth when compared to other plays by Shakespeare.', stars: 4 },
];

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/health') { res.end('ok\n'); return; }
  const m = /^\/reviews\/(\d+)$/.exec(path);
  if (!m || req.method !== 'GET') {
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`reviews ${VERSION}: no route for ${req.method} ${path}\n`);
    return;
  }
  const reviews = REVIEWS.map((r) => (VERSION === 'v1' ? { reviewer: r.reviewer, text: r.text } : { ...r, color: 'black' }));
  const xfcc = req.headers['x-forwarded-client-cert'];
  const body = JSON.stringify({ id: m[1], version: VERSION, podname: `reviews-${VERSION}@${hostname()}`, peer: typeof xfcc === 'string' ? xfcc : undefined, reviews });
  const headers: Record<string, string | number> = { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), 'x-reviews-version': VERSION };
  // Echo the request id (Envoy generates one per request) so a client can see it end to end.
  if (typeof req.headers['x-request-id'] === 'string') headers['x-request-id'] = req.headers['x-request-id'];
  res.writeHead(200, headers);
  res.end(body);
});
server.keepAliveTimeout = 60_000;
serve(`reviews ${VERSION}`, server);
