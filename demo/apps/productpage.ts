/**
 * "productpage" (after Istio's Bookinfo): GET /productpage renders a page with the book's reviews,
 * fetched from "reviews" through the proxy's outbound listener (REVIEWS_URL, authority REVIEWS_HOST),
 * as an app does through its sidecar. Trace headers are propagated; the reviews version is passed on
 * in `x-reviews-version`. A failed reviews call answers 503, so the demo counts it as a failure.
 */
import { Agent, createServer, request, type IncomingHttpHeaders } from 'node:http';
import { serve } from './common.ts';

const REVIEWS_URL = new URL(process.env.REVIEWS_URL ?? 'http://127.0.0.1:15001');
const REVIEWS_HOST = process.env.REVIEWS_HOST ?? 'reviews:9080';
const PROPAGATE = ['x-request-id', 'traceparent', 'tracestate', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'user-agent'];
const agent = new Agent({ keepAlive: true, maxSockets: 64 });

interface Reviews { version: string; reviews: Array<{ reviewer: string; text: string; stars?: number }> }

function fetchReviews(id: string, incoming: IncomingHttpHeaders): Promise<Reviews> {
  const headers: Record<string, string> = { host: REVIEWS_HOST };
  for (const h of PROPAGATE) if (typeof incoming[h] === 'string') headers[h] = incoming[h];
  return new Promise((resolve, reject) => {
    const req = request({ host: REVIEWS_URL.hostname, port: REVIEWS_URL.port, path: `/reviews/${id}`, headers, agent, timeout: 3000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => { body += s; });
      res.on('end', () => {
        if (res.statusCode !== 200) { reject(new Error(`reviews answered ${res.statusCode}: ${body.trim().slice(0, 200)}`)); return; }
        try { resolve(JSON.parse(body) as Reviews); } catch (err) { reject(err); }
      });
      res.on('error', reject);
    });
    req.on('timeout', () => req.destroy(new Error('reviews timed out')));
    req.on('error', reject);
    req.end();
  });
}

function render(r: Reviews): string {
  const items = r.reviews.map((x) => `<li><b>${x.reviewer}</b>: ${x.text}${x.stars ? ' ' + '★'.repeat(x.stars) : ''}</li>`).join('');
  return `<!doctype html><title>The Comedy of Errors</title><h1>The Comedy of Errors</h1><ul>${items}</ul><p>reviews-${r.version}</p>\n`;
}

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/health') { res.end('ok\n'); return; }
  if (path !== '/productpage' || req.method !== 'GET') {
    res.writeHead(404, { 'content-type': 'text/plain' }).end(`productpage: no route for ${req.method} ${path}\n`);
    return;
  }
  fetchReviews('0', req.headers).then((r) => {
    const body = render(r);
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-reviews-version': r.version });
    res.end(body);
  }, (err: Error) => {
    res.writeHead(503, { 'content-type': 'text/plain' }).end(`productpage: reviews unavailable: ${err.message}\n`);
  });
});
server.keepAliveTimeout = 60_000;
serve('productpage', server);
