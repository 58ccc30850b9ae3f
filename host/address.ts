// `IP:PORT` parsing with Envoy's rules (Network::Utility::parseInternetAddressAndPortNoThrow):
// IPv4 as `a.b.c.d:port`, IPv6 in brackets `[addr]:port`, port 0-65535, nothing else.
import { isIPv4, isIPv6 } from "node:net";

export interface IpPort {
  readonly ip: string;
  readonly port: number;
  readonly family: 4 | 6;
}

function parsePort(text: string): number | undefined {
  if (!/^\d{1,5}$/.test(text)) return undefined;
  const port = Number(text);
  return port <= 65535 ? port : undefined;
}

export function parseIpPort(text: string): IpPort | undefined {
  if (text.startsWith("[")) {
    const close = text.indexOf("]:");
    if (close < 0) return undefined;
    const ip = text.slice(1, close);
    const port = parsePort(text.slice(close + 2));
    if (port === undefined || !isIPv6(ip)) return undefined;
    return { ip, port, family: 6 };
  }
  const colon = text.lastIndexOf(":");
  if (colon < 0) return undefined;
  const ip = text.slice(0, colon);
  const port = parsePort(text.slice(colon + 1));
  if (port === undefined || !isIPv4(ip)) return undefined;
  return { ip, port, family: 4 };
}
