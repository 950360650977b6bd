/**
 * PROXY protocol v2 (haproxy's proxy-protocol.txt), as ztunnel writes it before the bytes of an
 * inbound connection when the workload's application tunnel asks for it: PROXY command over TCP,
 * the client's address and the HBONE target, and the client's SPIFFE identity in TLV 0xD0.
 */
import { isIPv4 } from 'node:net';
import type { SocketAddress } from '../outbound/request.ts';

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);
/** Istio's TLV for the peer identity. */
export const PEER_IDENTITY_TLV = 0xd0;

function v4(ip: string): Buffer {
  return Buffer.from(ip.split('.').map(Number));
}

function v6(ip: string): Buffer {
  if (isIPv4(ip)) return Buffer.concat([Buffer.alloc(10), Buffer.from([0xff, 0xff]), v4(ip)]);
  const [head, tail] = ip.includes('::') ? ip.split('::') : [ip, ''];
  const h = head ? head.split(':') : [], t = tail ? tail.split(':') : [];
  const words = [...h, ...new Array<string>(8 - h.length - t.length).fill('0'), ...t];
  const out = Buffer.alloc(16);
  words.forEach((w, i) => out.writeUInt16BE(parseInt(w, 16), i * 2));
  return out;
}

export function proxyV2Header(src: SocketAddress, dst: SocketAddress, identity: string | undefined): Buffer {
  const both4 = isIPv4(src.address) && isIPv4(dst.address);
  const addrs = both4 ? Buffer.concat([v4(src.address), v4(dst.address)]) : Buffer.concat([v6(src.address), v6(dst.address)]);
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(src.port, 0);
  ports.writeUInt16BE(dst.port, 2);
  const tlvs: Buffer[] = [];
  if (identity !== undefined) {
    const v = Buffer.from(identity, 'utf8');
    const t = Buffer.alloc(3);
    t.writeUInt8(PEER_IDENTITY_TLV, 0);
    t.writeUInt16BE(v.length, 1);
    tlvs.push(t, v);
  }
  const body = Buffer.concat([addrs, ports, ...tlvs]);
  const head = Buffer.alloc(4);
  head.writeUInt8(0x21, 0); // version 2, PROXY
  head.writeUInt8(both4 ? 0x11 : 0x21, 1); // TCP over IPv4 / IPv6
  head.writeUInt16BE(body.length, 2);
  return Buffer.concat([SIGNATURE, head, body]);
}
