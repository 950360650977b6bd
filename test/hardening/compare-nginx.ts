// Runs every vector of http1-vectors.ts through skua-proxy and through nginx (a loopback reverse
// proxy with WebSocket pass-through, one worker, temp config) in front of the same recording backend,
// and prints a Markdown table "vector → skua → nginx → verdict". By hand:
//
//   node test/hardening/compare-nginx.ts            (needs nginx on PATH; ./dev setup installs it)
//
// The last recorded table is test/hardening/compare-nginx.md.
//
// A cell is the first status (or `close` / `open` when none came), `+close` when the connection then
// closed, `+next` when the pipelined /next request was answered, `SMUGGLED` when the backend parsed a
// request the vector hid in a body or behind an upgrade that the proxy did not route (it lacks the
// `x-proxied` header both proxies add), `+routed` when the proxy routed that hidden request itself.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { freePort } from '../lib/proxy.ts';
import type { RunningProxy } from '../lib/proxy.ts';
import { startNginx } from '../../bench/lib/targets.ts';
import { stopProcess } from '../../bench/lib/procs.ts';
import { startRecordingBackend, type RecordingBackend } from './http1-backend.ts';
import { probe, startSkua } from './http1-harness.ts';
import { keepsAlive, NEXT, readFor, VECTORS, type Vector } from './http1-vectors.ts';

interface Outcome {
  readonly status: number | 'close' | 'open';
  readonly closed: boolean;
  readonly next: boolean;
  readonly smuggled: boolean;
  readonly routed: boolean;
  readonly crashed: boolean;
}

function nginxConf(dir: string, port: number, backendPort: number): string {
  const pass = `proxy_pass http://127.0.0.1:${backendPort}; proxy_http_version 1.1;`;
  return `worker_processes 1;
daemon off;
pid ${dir}/nginx.pid;
error_log stderr crit;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path ${dir}/body;
  proxy_temp_path ${dir}/proxy;
  fastcgi_temp_path ${dir}/fastcgi;
  uwsgi_temp_path ${dir}/uwsgi;
  scgi_temp_path ${dir}/scgi;
  map $http_upgrade $connection_upgrade { default upgrade; '' ''; }
  server {
    listen 127.0.0.1:${port};
    location / { ${pass} proxy_set_header Upgrade $http_upgrade; proxy_set_header Connection $connection_upgrade; proxy_set_header Host $host; proxy_set_header X-Proxied 1; }
    location /nows { ${pass} proxy_set_header Connection ""; proxy_set_header X-Proxied 1; }
  }
}
`;
}

const proxied = (h: ReadonlyArray<readonly [string, string]>): boolean => h.some(([k]) => k.toLowerCase() === 'x-proxied');

async function run(v: Vector, port: number, backend: RecordingBackend): Promise<Outcome> {
  backend.clear();
  const r = await probe(port, Buffer.from(v.request + NEXT, 'latin1'), { ...readFor(v), timeoutMs: 3000 });
  await new Promise((res) => setTimeout(res, 30));
  return {
    status: r.statuses[0] ?? (r.closed ? 'close' : 'open'),
    closed: r.closed,
    next: backend.targets('/next').length > 0 && r.statuses.length > 1,
    smuggled: backend.targets('/smuggled').some((q) => !proxied(q.headers)),
    routed: backend.targets('/smuggled').some((q) => proxied(q.headers)),
    crashed: false,
  };
}

function cell(o: Outcome): string {
  if (o.crashed) return '**crash**';
  return [String(o.status), o.closed && typeof o.status === 'number' ? '+close' : '', o.next ? '+next' : '', o.routed ? '+routed' : '', o.smuggled ? ' **SMUGGLED**' : ''].join('');
}

function verdict(v: Vector, s: Outcome, n: Outcome): string {
  if (s.smuggled || s.crashed) return '**skua unsafe**';
  if (n.smuggled) return 'nginx smuggles; skua safe';
  if (s.status === n.status && s.next !== n.next) return `same status; then ${s.next ? 'skua' : 'nginx'} goes on with HTTP, ${s.next ? 'nginx' : 'skua'} closes`;
  if (s.status === n.status) return 'same';
  const refused = (o: Outcome): boolean => typeof o.status !== 'number' || o.status >= 400;
  if (refused(s) && !refused(n)) return `skua stricter${v.note ? ` (${v.note})` : ''}`;
  if (!refused(s) && refused(n)) return `nginx stricter${v.note ? ` (${v.note})` : ''}`;
  return `both refuse, different status${v.note ? ` (${v.note})` : ''}`;
}

async function main(): Promise<void> {
  const backend = await startRecordingBackend();
  const dir = mkdtempSync(path.join(tmpdir(), 'skua-cmp-nginx-'));
  const nginxPort = await freePort();
  const nginx = await startNginx('h1cmp', dir, nginxConf(dir, nginxPort, backend.port), nginxPort);
  let skua: RunningProxy = await startSkua(backend.port);
  const rows: string[] = ['| group | vector | skua | nginx | verdict |', '|---|---|---|---|---|'];
  try {
    for (const v of VECTORS) {
      let s = await run(v, skua.ports.http, backend);
      if (skua.pid > 0 && await Promise.race([skua.exited.then(() => true), new Promise<boolean>((r) => setTimeout(() => r(false), 20))])) {
        s = { ...s, crashed: true };
        await skua.stop({ allowExited: true });
        skua = await startSkua(backend.port);
      }
      const n = await run(v, nginxPort, backend);
      const expected = v.status === s.status && (keepsAlive(v) ? s.next : true);
      rows.push(`| ${v.group} | ${v.name.replace(/\|/g, '\\|')} | ${cell(s)}${expected ? '' : ' (expected ' + v.status + ')'} | ${cell(n)} | ${verdict(v, s, n)} |`);
    }
  } finally {
    await skua.stop({ allowExited: true });
    await stopProcess(nginx);
    await backend.close();
    rmSync(dir, { recursive: true, force: true });
  }
  console.log(rows.join('\n'));
}

await main();
