/**
 * Istio's Bookinfo, shaped as the samples expect (SERVICE = productpage | details | reviews | ratings |
 * httpbin, VERSION = v1…), each behind its own skua-proxy sidecar:
 * - productpage calls details and reviews through its sidecar (DETAILS_URL, REVIEWS_URL; authority
 *   `details:9080` / `reviews:9080`), forwarding `end-user` (set by /login?user=jason, as a cookie) and
 *   the trace headers; like Bookinfo's, it waits 3 s for reviews and tries twice, 3 s for details.
 *   The page names the reviews version (`x-reviews-version` header too) and shows Bookinfo's
 *   messages when a call fails.
 * - reviews v1 has no ratings; v2 (black stars, 10 s ratings timeout) and v3 (red stars, 2.5 s) call
 *   ratings through their sidecar (RATINGS_URL), showing "Ratings service is currently unavailable" when that fails.
 * - details and ratings answer JSON; httpbin echoes the request (and who called: `x-forwarded-client-cert`).
 */
import { Agent, createServer, request, type IncomingHttpHeaders, type IncomingMessage, type ServerResponse } from 'node:http';
import { serve } from './common.ts';

const SERVICE = process.env.SERVICE ?? 'productpage';
const VERSION = process.env.VERSION ?? 'v1';
const agent = new Agent({ keepAlive: true, maxSockets: 64 });
const FORWARD = ['end-user', 'x-request-id', 'traceparent', 'tracestate', 'x-b3-traceid', 'x-b3-spanid', 'x-b3-parentspanid', 'x-b3-sampled', 'user-agent'];

interface Call { status: number; body: string }

/** GET through the sidecar: `url` is where the sidecar listens, `authority` the service the app asks for. */
function call(url: string, authority: string, path: string, incoming: IncomingHttpHeaders, timeoutMs: number): Promise<Call> {
  const u = new URL(url);
  const headers: Record<string, string> = { host: authority };
  for (const h of FORWARD) if (typeof incoming[h] === 'string') headers[h] = incoming[h];
  return new Promise((resolve, reject) => {
    const req = request({ host: u.hostname, port: u.port, path, headers, agent }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (s: string) => { body += s; });
      res.on('end', () => { clearTimeout(timer); resolve({ status: res.statusCode ?? 0, body }); });
      res.on('error', reject);
    });
    const timer = setTimeout(() => req.destroy(new Error(`timed out after ${timeoutMs} ms`)), timeoutMs);
    req.on('error', (err) => { clearTimeout(timer); reject(err); });
    req.end();
  });
}

function json(res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text), ...headers }).end(text);
}

function userOf(req: IncomingMessage): string | undefined {
  if (typeof req.headers['end-user'] === 'string') return req.headers['end-user'];
  return /(?:^|;\s*)user=([^;]+)/.exec(req.headers.cookie ?? '')?.[1];
}

async function productpage(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://x');
  if (path === '/login') { res.writeHead(302, { 'set-cookie': `user=${url.searchParams.get('user') ?? 'jason'}; Path=/`, location: '/productpage' }).end(); return; }
  if (path === '/logout') { res.writeHead(302, { 'set-cookie': 'user=; Path=/; Max-Age=0', location: '/productpage' }).end(); return; }
  if (path.startsWith('/api/v1/products')) { json(res, 200, [{ id: 0, title: 'The Comedy of Errors' }]); return; }
  if (path !== '/productpage') { res.writeHead(404, { 'content-type': 'text/plain' }).end(`productpage: no route for ${path}\n`); return; }
  const user = userOf(req);
  const incoming = { ...req.headers, ...(user ? { 'end-user': user } : {}) };
  const details = await call(process.env.DETAILS_URL!, 'details:9080', '/details/0', incoming, 3000).catch((e: Error) => ({ status: 0, body: e.message }));
  let reviews: Call = { status: 0, body: '' };
  // Bookinfo's productpage tries reviews twice, 3 s each.
  for (let i = 0; i < 2; i++) {
    reviews = await call(process.env.REVIEWS_URL!, 'reviews:9080', '/reviews/0', incoming, 3000).catch((e: Error) => ({ status: 0, body: e.message }));
    if (reviews.status === 200) break;
  }
  const r = reviews.status === 200 ? JSON.parse(reviews.body) as { version: string; reviews: Array<{ reviewer: string; text: string; rating?: { stars?: number; color?: string; error?: string } }> } : undefined;
  const d = details.status === 200 ? JSON.parse(details.body) as { author: string } : undefined;
  const parts = [`<h1>The Comedy of Errors</h1>${user ? `<p>signed in as ${user}</p>` : ''}`];
  parts.push(d ? `<p>details: by ${d.author}</p>` : `<p>Sorry, product details are currently unavailable for this book. (${details.status || details.body})</p>`);
  if (r) {
    for (const x of r.reviews) parts.push(`<li>${x.reviewer}: ${x.text} ${x.rating?.error ? `<i>${x.rating.error}</i>` : x.rating?.stars ? `<span class="${x.rating.color}">${'★'.repeat(x.rating.stars)}</span>` : ''}</li>`);
    parts.push(`<p>reviews-${r.version}</p>`);
  } else parts.push(`<p>Sorry, product reviews are currently unavailable for this book. (${reviews.status || reviews.body})</p>`);
  const body = `<!doctype html><title>Bookinfo</title>${parts.join('\n')}\n`;
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'content-length': Buffer.byteLength(body), 'x-reviews-version': r?.version ?? 'none' }).end(body);
}

async function reviews(req: IncomingMessage, res: ServerResponse, path: string): Promise<void> {
  if (!/^\/reviews\/\d+$/.test(path)) { res.writeHead(404).end(); return; }
  const list = [{ reviewer: 'Reviewer1', text: 'An extremely entertaining play by Shakespeare. The slapstick humour is refreshing!' }, { reviewer: 'Reviewer2', text: 'Absolutely fun and entertaining.' }];
  if (VERSION === 'v1') { json(res, 200, { version: VERSION, reviews: list, peer: req.headers['x-forwarded-client-cert'] }, { 'x-reviews-version': VERSION }); return; }
  const color = VERSION === 'v2' ? 'black' : 'red';
  const timeout = VERSION === 'v2' ? 10_000 : 2500;
  const ratings = await call(process.env.RATINGS_URL!, 'ratings:9080', '/ratings/0', req.headers, timeout).catch((e: Error) => ({ status: 0, body: e.message }));
  const stars = ratings.status === 200 ? (JSON.parse(ratings.body) as { ratings: Record<string, number> }).ratings : undefined;
  const out = list.map((x) => ({ ...x, rating: stars ? { stars: stars[x.reviewer], color } : { error: 'Ratings service is currently unavailable' } }));
  json(res, 200, { version: VERSION, reviews: out, ratingsStatus: ratings.status, peer: req.headers['x-forwarded-client-cert'] }, { 'x-reviews-version': VERSION });
}

const server = createServer((req, res) => {
  const path = (req.url ?? '/').split('?')[0];
  if (path === '/health') { res.end('ok\n'); return; }
  const fail = (err: Error): void => { if (!res.headersSent) res.writeHead(500).end(`${SERVICE}: ${err.message}\n`); };
  switch (SERVICE) {
    case 'productpage': productpage(req, res, path).catch(fail); return;
    case 'reviews': reviews(req, res, path).catch(fail); return;
    case 'details':
      if (/^\/details\/\d+$/.test(path)) json(res, 200, { id: 0, author: 'William Shakespeare', year: 1595, type: 'paperback', pages: 200 });
      else res.writeHead(404).end();
      return;
    case 'ratings':
      if (/^\/ratings\/\d+$/.test(path)) json(res, 200, { id: 0, ratings: { Reviewer1: 5, Reviewer2: 4 } });
      else res.writeHead(404).end();
      return;
    default: {
      // httpbin: echo what arrived.
      let n = 0;
      req.on('data', (c: Buffer) => { n += c.length; });
      // remote: who connected (127.0.0.6 when a sidecar delivered it, as Istio's inbound does).
      req.on('end', () => json(res, 200, { method: req.method, path, bytes: n, peer: req.headers['x-forwarded-client-cert'], remote: req.socket.remoteAddress }));
    }
  }
});
server.keepAliveTimeout = 60_000;
serve(`${SERVICE} ${VERSION}`, server);
