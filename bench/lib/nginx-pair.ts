/**
 * The reference sidecar pair: two nginx, one worker each, mutual TLS 1.3 between them with
 * P-256 certificates from a throw-away CA (openssl), keep-alive on every hop. The client side
 * listens in plaintext (the app's side) and proxies over HTTPS with its client certificate; the
 * server side requires and verifies it, then proxies to the backend. nginx's proxy module speaks
 * HTTP/1.1 upstream only, so this pair has no HTTP/2 variant.
 */
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { HOST } from './net.ts';
import { nginxHead, nginxHttpCommon } from './peer-configs.ts';

export interface PairCerts { readonly ca: string; readonly serverCert: string; readonly serverKey: string; readonly clientCert: string; readonly clientKey: string }

const SERVER_NAME = 'server.default.svc.cluster.local';

/** A CA and a server and a client certificate (P-256, as Istio's workload certificates). */
export function makePairCerts(dir: string): PairCerts {
  mkdirSync(dir, { recursive: true });
  const f = (n: string): string => path.join(dir, n);
  const ssl = (args: string[]): void => { execFileSync('openssl', args, { stdio: 'ignore', timeout: 20_000 }); };
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  ssl(['req', '-x509', ...ec, '-days', '2', '-subj', '/O=cluster.local/CN=bench root', '-keyout', f('ca.key'), '-out', f('ca.pem')]);
  for (const [who, ext] of [['server', `subjectAltName=DNS:${SERVER_NAME}\nextendedKeyUsage=serverAuth`], ['client', 'subjectAltName=URI:spiffe://cluster.local/ns/default/sa/client\nextendedKeyUsage=clientAuth']] as const) {
    execFileSync('sh', ['-c', `printf '%s\\n' "$1" > "$2"`, 'sh', ext, f(`${who}.ext`)]);
    ssl(['req', ...ec, '-subj', `/O=cluster.local/CN=${who}`, '-keyout', f(`${who}.key`), '-out', f(`${who}.csr`)]);
    ssl(['x509', '-req', '-in', f(`${who}.csr`), '-CA', f('ca.pem'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '2', '-extfile', f(`${who}.ext`), '-out', f(`${who}.pem`)]);
  }
  return { ca: f('ca.pem'), serverCert: f('server.pem'), serverKey: f('server.key'), clientCert: f('client.pem'), clientKey: f('client.key') };
}

function head(dir: string, name: string): string {
  return `${nginxHead(dir, name)}http {
${nginxHttpCommon(dir, name)}`;
}

/** The server side: TLS 1.3, client certificate required, → backend (keep-alive). */
export function nginxPairServerConf(dir: string, port: number, backendPort: number, c: PairCerts): string {
  return `${head(dir, 'pair-server')}  upstream app {
    server ${HOST}:${backendPort};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen ${HOST}:${port} ssl;
    ssl_protocols TLSv1.3;
    ssl_certificate ${c.serverCert};
    ssl_certificate_key ${c.serverKey};
    ssl_client_certificate ${c.ca};
    ssl_verify_client on;
    location / {
      proxy_pass http://app;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
    }
  }
}
`;
}

/** The client side: plaintext from the app, → the server side over mutual TLS (keep-alive). */
export function nginxPairClientConf(dir: string, port: number, serverPort: number, c: PairCerts): string {
  return `${head(dir, 'pair-client')}  upstream peer {
    server ${HOST}:${serverPort};
    keepalive 64;
    keepalive_requests 1000000;
  }
  server {
    listen ${HOST}:${port};
    location / {
      proxy_pass https://peer;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_ssl_protocols TLSv1.3;
      proxy_ssl_certificate ${c.clientCert};
      proxy_ssl_certificate_key ${c.clientKey};
      proxy_ssl_trusted_certificate ${c.ca};
      proxy_ssl_verify on;
      proxy_ssl_name ${SERVER_NAME};
      proxy_ssl_server_name on;
      proxy_ssl_session_reuse on;
    }
  }
}
`;
}

/** The backend behind every case: a fixed body (1 KB in Istio's set-up), one worker. */
export function nginxFixedBodyConf(dir: string, port: number, body: string): string {
  return `${head(dir, 'pair-backend')}  default_type text/plain;
  server {
    listen ${HOST}:${port};
    location / { return 200 "${body}"; }
  }
}
`;
}
