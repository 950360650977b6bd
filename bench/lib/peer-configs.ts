/**
 * nginx and haproxy configurations, one worker each, tuned the way a user who
 * benchmarks them would: no access logs, keep-alive to the upstream, no
 * per-connection request cap that would force reconnects mid-run.
 */
import { HOST } from './net.ts';

export const NGINX_STREAM_MODULE = '/usr/lib/nginx/modules/ngx_stream_module.so';

/** The fixed body the backend answers every request with. */
export const BACKEND_BODY = 'hello';

export function nginxHead(dir: string, name: string): string {
  return `worker_processes 1;
daemon off;
pid ${dir}/${name}.pid;
error_log stderr warn;
events { worker_connections 4096; }
`;
}

export function nginxHttpCommon(dir: string, name: string): string {
  return `  access_log off;
  keepalive_requests 1000000;
  keepalive_timeout 75s;
  client_body_temp_path ${dir}/${name}-body;
  proxy_temp_path ${dir}/${name}-proxy;
  fastcgi_temp_path ${dir}/${name}-fastcgi;
  uwsgi_temp_path ${dir}/${name}-uwsgi;
  scgi_temp_path ${dir}/${name}-scgi;
`;
}

/** The backend every L7 target reaches: a fixed small body, one worker. */
export function nginxBackendConf(dir: string, port: number): string {
  return `${nginxHead(dir, 'backend')}http {
${nginxHttpCommon(dir, 'backend')}  default_type text/plain;
  server {
    listen ${HOST}:${port};
    location / { return 200 "${BACKEND_BODY}"; }
  }
}
`;
}

export function nginxHttpProxyConf(dir: string, port: number, backendPort: number): string {
  return `${nginxHead(dir, 'proxy')}http {
${nginxHttpCommon(dir, 'proxy')}  upstream backend {
    server ${HOST}:${backendPort};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen ${HOST}:${port};
    location / {
      proxy_pass http://backend;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
}

export function nginxTcpProxyConf(dir: string, port: number, upstreamPort: number): string {
  return `load_module ${NGINX_STREAM_MODULE};
${nginxHead(dir, 'stream')}stream {
  server {
    listen ${HOST}:${port};
    proxy_pass ${HOST}:${upstreamPort};
  }
}
`;
}

export function haproxyConf(mode: 'http' | 'tcp', port: number, upstreamPort: number): string {
  return `global
  nbthread 1
  maxconn 4096

defaults
  mode ${mode}
  timeout connect 5s
  timeout client 60s
  timeout server 60s

frontend bench
  bind ${HOST}:${port}
  default_backend upstream

backend upstream
  server s1 ${HOST}:${upstreamPort}
`;
}
