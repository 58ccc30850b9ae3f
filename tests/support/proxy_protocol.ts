// PROXY protocol v2 headers, as a mesh client's redirect would restore them: the test client
// prepends one so that Envoy's proxy_protocol listener filter sees the "original destination"
// (the pod IP:port the application dialled) without iptables.
import { isIPv4, isIPv6 } from "node:net";

const SIGNATURE = Buffer.from([0x0d, 0x0a, 0x0d, 0x0a, 0x00, 0x0d, 0x0a, 0x51, 0x55, 0x49, 0x54, 0x0a]);

function ipv6Bytes(address: string): Buffer {
  const [head, tail = ""] = address.split("::");
  const parts = (s: string) => (s ? s.split(":") : []);
  const left = parts(head);
  const right = address.includes("::") ? parts(tail) : [];
  const groups = [...left, ...Array(8 - left.length - right.length).fill("0"), ...right];
  const out = Buffer.alloc(16);
  groups.forEach((group, i) => out.writeUInt16BE(parseInt(group, 16), i * 2));
  return out;
}

export interface Tlv {
  type: number;
  value: Buffer;
}

/** A PROXY v2 PROXY/TCP header from source to destination ("ip:port", IPv6 as "[ip]:port"). */
export function proxyV2Header(source: string, destination: string, tlvs: Tlv[] = []): Buffer {
  const [srcIp, srcPort] = splitAddress(source);
  const [dstIp, dstPort] = splitAddress(destination);
  const v4 = isIPv4(srcIp) && isIPv4(dstIp);
  if (!v4 && !(isIPv6(srcIp) && isIPv6(dstIp))) throw new Error("source and destination must share a family");
  const addresses = v4
    ? Buffer.concat([Buffer.from(srcIp.split(".").map(Number)), Buffer.from(dstIp.split(".").map(Number))])
    : Buffer.concat([ipv6Bytes(srcIp), ipv6Bytes(dstIp)]);
  const ports = Buffer.alloc(4);
  ports.writeUInt16BE(srcPort, 0);
  ports.writeUInt16BE(dstPort, 2);
  const tlvBytes = Buffer.concat(
    tlvs.map((tlv) => {
      const head = Buffer.alloc(3);
      head.writeUInt8(tlv.type, 0);
      head.writeUInt16BE(tlv.value.length, 1);
      return Buffer.concat([head, tlv.value]);
    }),
  );
  const body = Buffer.concat([addresses, ports, tlvBytes]);
  const head = Buffer.alloc(4);
  head.writeUInt8(0x21, 0); // version 2, command PROXY
  head.writeUInt8(v4 ? 0x11 : 0x21, 1); // TCP over IPv4 / IPv6
  head.writeUInt16BE(body.length, 2);
  return Buffer.concat([SIGNATURE, head, body]);
}

export function splitAddress(address: string): [string, number] {
  const match = /^\[(.+)\]:(\d+)$/.exec(address) ?? /^([^:]+):(\d+)$/.exec(address);
  if (!match) throw new Error(`not an ip:port address: ${address}`);
  return [match[1], Number(match[2])];
}
