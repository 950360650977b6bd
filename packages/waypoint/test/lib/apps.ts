/**
 * The apps of the waypoint mesh, run with Node in pod namespaces; none knows about the mesh.
 * HTTP_APP answers every request with `{pod, method, path, peer}` (status 503 when told to fail),
 * and `/__hits` with how many requests it served. HTTP_CLIENT sends N keep-alive requests one after
 * another and prints the status and pod counts as JSON.
 */
export const HTTP_APP = `
const http = require('node:http');
const [port, pod, status] = [Number(process.argv[2]), process.argv[3], Number(process.argv[4] || 200)];
let hits = 0;
const server = http.createServer((req, res) => {
  if (req.url === '/__hits') { res.end(String(hits)); return; }
  hits++;
  req.resume();
  req.on('end', () => {
    const body = JSON.stringify({ pod, method: req.method, path: req.url, peer: req.socket.remoteAddress });
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(body);
  });
});
server.keepAliveTimeout = 60000;
server.listen(port, '0.0.0.0', () => console.log('listening'));
`;

export const HTTP_CLIENT = `
const http = require('node:http');
const [url, count, method] = [process.argv[2], Number(process.argv[3]), process.argv[4] || 'GET'];
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
const status = {}, pods = {}, bodies = {}, peers = {};
function one() {
  return new Promise((resolve) => {
    const req = http.request(url, { method, agent, timeout: 10000 }, (res) => {
      let b = '';
      res.setEncoding('utf8');
      res.on('data', (c) => { b += c; });
      res.on('end', () => {
        status[res.statusCode] = (status[res.statusCode] || 0) + 1;
        if (!bodies[res.statusCode]) bodies[res.statusCode] = b;
        try { const j = JSON.parse(b); pods[j.pod] = (pods[j.pod] || 0) + 1; peers[j.peer] = (peers[j.peer] || 0) + 1; } catch {}
        resolve();
      });
    });
    req.on('error', (e) => { status[e.code || 'error'] = (status[e.code || 'error'] || 0) + 1; resolve(); });
    req.on('timeout', () => req.destroy(Object.assign(new Error('timeout'), { code: 'timeout' })));
    if (method === 'POST') req.end('{"x":1}'); else req.end();
  });
}
(async () => {
  for (let i = 0; i < count; i++) await one();
  agent.destroy();
  console.log(JSON.stringify({ status, pods, bodies, peers }));
})();
`;

export interface ClientResult {
  readonly status: Readonly<Record<string, number>>;
  readonly pods: Readonly<Record<string, number>>;
  readonly bodies: Readonly<Record<string, string>>;
  readonly peers: Readonly<Record<string, number>>;
}
