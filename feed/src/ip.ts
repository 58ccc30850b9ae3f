// IP spellings as the mesh parser compares them (assembly/mesh/ip.ts): IPv6 compressed in
// lower case (RFC 5952), IPv4-mapped IPv6 as IPv4. The feed deduplicates addresses with these
// keys, so two spellings of one address never reach the filter as two.
import { isIP } from "node:net";

export function canonicalIp(ip: string): string {
  if (isIP(ip) !== 6) return ip;
  // WHATWG URL serialises IPv6 hosts in RFC 5952 form (and ::ffff:a.b.c.d as ::ffff:xxxx:xxxx).
  const host = new URL(`http://[${ip}]/`).hostname.slice(1, -1);
  const mapped = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/.exec(host);
  if (mapped) {
    const hi = parseInt(mapped[1], 16);
    const lo = parseInt(mapped[2], 16);
    return `${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`;
  }
  return host;
}
