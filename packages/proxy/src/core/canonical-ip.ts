/**
 * The one IPv4-mapped-address canonicaliser. A dual-stack socket reports IPv4 peers as
 * `::ffff:a.b.c.d`; Envoy (addressFromSockAddr with v6only=false) and ztunnel (to_canonical) treat
 * them as the IPv4 address, so every address the proxy compares, logs or matches goes through here.
 * `canonicalIpText` also validates and spells IPv6 one way, for addresses read from config or a
 * CONNECT authority rather than from a socket.
 */
import { formatWords, parseIpInto } from './cidr.ts';

const WORDS = new Uint32Array(4);

/**
 * `ip` with an IPv4-mapped IPv6 address in any spelling (`::ffff:10.0.0.1`, `::FFFF:10.0.0.1`,
 * `::ffff:a00:1`, `0:0:0:0:0:ffff:10.0.0.1`) turned into dotted-quad IPv4; anything else (IPv4,
 * other IPv6, names, '') comes back unchanged. Allocation-free when nothing changes.
 */
export function canonicalIp(ip: string): string {
  // Fast paths: no colon = IPv4 or a name; the form Node prints.
  if (ip.indexOf(':') < 0) return ip;
  if (ip.startsWith('::ffff:') && ip.indexOf('.', 7) > 0 && ip.indexOf(':', 7) < 0) return ip.slice(7);
  // Any other mapped spelling holds "ffff" in some case; plain IPv6 without it is left alone.
  if (!hasFfff(ip)) return ip;
  return parseIpInto(ip, WORDS) === 4 ? formatWords(4, WORDS) : ip;
}

function hasFfff(s: string): boolean {
  let run = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i) | 0x20;
    run = c === 102 ? run + 1 : 0; // 'f' or 'F'
    if (run === 4) return true;
  }
  return false;
}

/**
 * The canonical text of an IP address in any spelling — IPv4-mapped as the dotted quad, other IPv6
 * as RFC 5952 (lower case, the longest zero run as `::`) — or undefined when `text` is not an
 * address (a name, '', a leading-zero octet, a `%zone`).
 */
export function canonicalIpText(text: string): string | undefined {
  if (text.indexOf('%') >= 0) return undefined;
  const family = parseIpInto(text, WORDS);
  if (family === 0) return undefined;
  return family === 4 && text.indexOf(':') < 0 ? text : formatWords(family, WORDS);
}
