// Shared by the HBONE tests: a real CA (skua-controlplane's), a certificate manager over it, a TCP
// echo backend that counts bytes, and HBONE servers that relay each CONNECT to its :authority.
import { connect as netConnect, createServer, type Server, type Socket } from 'node:net';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CertificateManager, type WorkloadCertificate } from '../../src/tls/cert-manager.ts';
import { HboneServer, type HboneInbound, type HboneServerOptions } from '../../src/hbone/server.ts';
import { relay } from '../../src/hbone/relay.ts';
import { CertificateAuthority } from '../../../controlplane/src/ca/authority.ts';

export const TD = 'cluster.local';
export const id = (ns: string, sa: string): string => `spiffe://${TD}/ns/${ns}/sa/${sa}`;

export interface Fixture {
  readonly ca: CertificateAuthority;
  readonly certs: CertificateManager;
  readonly echoPort: number;
  /** Bytes the echo backend received, per connection, in order. */
  readonly echoed: number[];
  readonly servers: HboneServer[];
  /** An HBONE server on 127.0.0.1 presenting `identity`, relaying CONNECTs to the echo backend. */
  server(identity: string, extra?: Partial<HboneServerOptions>): Promise<{ server: HboneServer; port: number; inbound: HboneInbound[] }>;
  /** PEM files for an external peer: chain, key, root. */
  files(c: WorkloadCertificate): { cert: string; key: string; ca: string };
  close(): Promise<void>;
}

export async function fixture(): Promise<Fixture> {
  const ca = await CertificateAuthority.create({ trustDomain: TD });
  const certs = new CertificateManager({ issue: (identity, csr, ttl) => ca.issue(csr, identity, ttl), rootCertPem: ca.rootCertPem, ttlSec: 3600 });
  const echoed: number[] = [];
  const sockets = new Set<Socket>();
  const echo: Server = createServer({ allowHalfOpen: true }, (s) => {
    sockets.add(s);
    s.once('close', () => sockets.delete(s));
    const i = echoed.push(0) - 1;
    s.on('data', (b: Buffer) => { echoed[i] += b.length; s.write(b); });
    s.on('end', () => s.end());
    s.on('error', () => s.destroy());
  });
  await new Promise<void>((r) => echo.listen(0, '127.0.0.1', r));
  const echoPort = (echo.address() as { port: number }).port;
  const servers: HboneServer[] = [];
  const dir = mkdtempSync(join(tmpdir(), 'skua-hbone-'));
  let n = 0;
  return {
    ca, certs, echoPort, echoed, servers,
    async server(identity, extra = {}) {
      const inbound: HboneInbound[] = [];
      const server = new HboneServer({
        certificate: () => certs.get(identity),
        onStream: (req) => {
          inbound.push(req);
          const [host, port] = [req.authority.slice(0, req.authority.lastIndexOf(':')), Number(req.authority.slice(req.authority.lastIndexOf(':') + 1))];
          const up = netConnect({ host, port, allowHalfOpen: true });
          up.once('connect', () => relay(req.accept(), up, () => { /* counted by the test */ }));
          up.once('error', () => req.refuse(503));
        },
        ...extra,
      });
      servers.push(server);
      return { server, port: await server.listen(0, '127.0.0.1'), inbound };
    },
    files(c) {
      const base = join(dir, String(n++));
      writeFileSync(`${base}.crt`, c.chainPem);
      writeFileSync(`${base}.key`, c.keyPem, { mode: 0o600 });
      writeFileSync(`${base}.ca`, c.rootPem);
      return { cert: `${base}.crt`, key: `${base}.key`, ca: `${base}.ca` };
    },
    async close() {
      certs.stop();
      for (const s of servers) s.destroy();
      for (const s of sockets) s.destroy();
      await new Promise<void>((r) => echo.close(() => r()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Writes `bytes` through a tunnel stream, half-closes, and resolves with what came back. */
export function roundTrip(stream: NodeJS.ReadWriteStream & { destroy(): void }, bytes: number): Promise<number> {
  return new Promise((resolve, reject) => {
    let got = 0;
    stream.on('data', (b: Buffer) => { got += b.length; });
    stream.once('end', () => resolve(got));
    stream.once('error', reject);
    stream.end(Buffer.alloc(bytes, 7));
  });
}
