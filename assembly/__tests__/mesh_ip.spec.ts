import {
  Address,
  FAMILY_NONE,
  FAMILY_V4,
  FAMILY_V6,
  formatAddress,
  formatIp,
  IpParse,
  parseIpBytes,
  parseIpString,
  parseSocketAddress,
  parseSocketAddressString,
  writeAddress,
} from "../mesh";
import { ByteText } from "../runtime/text";

function ip(text: string): Address {
  const a = new Address();
  parseIpString(text, a);
  return a;
}

/** parseSocketAddress over the UTF-8 bytes of `text`, as the filter reads the host value. */
function socket(text: string, out: Address): bool {
  const bytes = String.UTF8.encode(text);
  return parseSocketAddress(changetype<usize>(bytes), bytes.byteLength, out);
}

function rawBytes(values: u8[]): ArrayBuffer {
  const buf = new ArrayBuffer(values.length);
  for (let i = 0; i < values.length; i++) store<u8>(changetype<usize>(buf) + <usize>i, values[i]);
  return buf;
}

describe("parseIpString", () => {
  it("parses IPv4 into a u32 key", () => {
    const a = ip("10.0.0.1");
    expect(a.family).toBe(FAMILY_V4);
    expect(a.v4).toBe(0x0a000001);
    expect(ip("255.255.255.255").v4).toBe(0xffffffff);
    expect(ip("0.0.0.0").family).toBe(FAMILY_V4);
  });

  it("refuses malformed IPv4", () => {
    const a = new Address();
    expect(parseIpString("10.0.0.300", a)).toBe(IpParse.Invalid);
    expect(parseIpString("10.0.0", a)).toBe(IpParse.Invalid);
    expect(parseIpString("10.0.0.1.2", a)).toBe(IpParse.Invalid);
    expect(parseIpString("010.0.0.1", a)).toBe(IpParse.Invalid);
    expect(parseIpString("10..0.1", a)).toBe(IpParse.Invalid);
    expect(parseIpString("10.0.0.1 ", a)).toBe(IpParse.Invalid);
    expect(parseIpString("1000.0.0.1", a)).toBe(IpParse.Invalid);
    expect(parseIpString("", a)).toBe(IpParse.Invalid);
    expect(parseIpString("a.b.c.d", a)).toBe(IpParse.Invalid);
    expect(a.family).toBe(FAMILY_NONE);
  });

  it("parses IPv6 into a (hi, lo) key and normalizes spellings", () => {
    const a = ip("fd00::1");
    expect(a.family).toBe(FAMILY_V6);
    expect(a.hi).toBe(0xfd00000000000000);
    expect(a.lo).toBe(1);
    expect(ip("FD00:0::1").sameIp(a)).toBe(true);
    expect(ip("fd00:0000:0000:0000:0000:0000:0000:0001").sameIp(a)).toBe(true);
    expect(ip("::").family).toBe(FAMILY_V6);
    expect(ip("::").lo).toBe(0);
    expect(ip("::1").lo).toBe(1);
    expect(ip("1::").hi).toBe(0x0001000000000000);
    expect(ip("1:2:3:4:5:6:7::").lo).toBe(0x0005000600070000);
    expect(ip("64:ff9b::10.0.0.1").lo).toBe(0x0a000001);
  });

  it("refuses malformed IPv6", () => {
    const a = new Address();
    expect(parseIpString("fd00:::1", a)).toBe(IpParse.Invalid);
    expect(parseIpString("1::2::3", a)).toBe(IpParse.Invalid);
    expect(parseIpString("1:2:3:4:5:6:7:8:9", a)).toBe(IpParse.Invalid);
    expect(parseIpString("1:2:3:4:5:6:7", a)).toBe(IpParse.Invalid);
    expect(parseIpString("12345::", a)).toBe(IpParse.Invalid);
    expect(parseIpString("fd00::g", a)).toBe(IpParse.Invalid);
    expect(parseIpString(":1::", a)).toBe(IpParse.Invalid);
    expect(parseIpString("1:", a)).toBe(IpParse.Invalid);
    expect(parseIpString("::1.2.3", a)).toBe(IpParse.Invalid);
    expect(parseIpString("1:2:3:4:5:6:7:1.2.3.4", a)).toBe(IpParse.Invalid);
    expect(parseIpString("[fd00::1]", a)).toBe(IpParse.Invalid);
  });

  it("reports an IPv6 zone separately", () => {
    const a = new Address();
    expect(parseIpString("fe80::1%eth0", a)).toBe(IpParse.Zone);
    expect(a.family).toBe(FAMILY_NONE);
    expect(parseIpString("10.0.0.1%eth0", a)).toBe(IpParse.Invalid);
    expect(parseIpString("junk%eth0", a)).toBe(IpParse.Invalid);
  });

  it("turns IPv4-mapped IPv6 into the IPv4 key", () => {
    const a = ip("::ffff:10.0.0.1");
    expect(a.family).toBe(FAMILY_V4);
    expect(a.v4).toBe(0x0a000001);
    expect(ip("::FFFF:a00:1").sameIp(ip("10.0.0.1"))).toBe(true);
  });

  it("parses from raw bytes too", () => {
    const bytes = String.UTF8.encode("fd00::2");
    const a = new Address();
    expect(parseIpBytes(changetype<usize>(bytes), bytes.byteLength, a)).toBe(IpParse.Ok);
    expect(a.lo).toBe(2);
  });
});

describe("parseSocketAddress", () => {
  it("reads IPv4 ip:port", () => {
    const a = new Address();
    expect(socket("10.0.0.1:80", a)).toBe(true);
    expect(a.family).toBe(FAMILY_V4);
    expect(a.v4).toBe(0x0a000001);
    expect(a.port).toBe(80);
    expect(socket("10.0.0.1:65535", a)).toBe(true);
    expect(a.port).toBe(65535);
    expect(socket("10.0.0.1:0", a)).toBe(true);
    expect(a.port).toBe(0);
  });

  it("reads bracketed IPv6 [ip]:port", () => {
    const a = new Address();
    expect(socket("[fd00::1]:80", a)).toBe(true);
    expect(a.family).toBe(FAMILY_V6);
    expect(a.hi).toBe(0xfd00000000000000);
    expect(a.lo).toBe(1);
    expect(a.port).toBe(80);
  });

  it("reads an IPv4-mapped socket address as IPv4", () => {
    const a = new Address();
    expect(socket("[::ffff:10.0.0.1]:8080", a)).toBe(true);
    expect(a.family).toBe(FAMILY_V4);
    expect(a.v4).toBe(0x0a000001);
    expect(a.port).toBe(8080);
  });

  it("refuses addresses without a usable port", () => {
    const a = new Address();
    expect(socket("10.0.0.1", a)).toBe(false);
    expect(socket("10.0.0.1:", a)).toBe(false);
    expect(socket("10.0.0.1:99999", a)).toBe(false);
    expect(socket("10.0.0.1:65536", a)).toBe(false);
    expect(socket("10.0.0.1:080", a)).toBe(false);
    expect(socket("10.0.0.1:-1", a)).toBe(false);
    expect(socket("10.0.0.1:8a", a)).toBe(false);
    expect(socket("[fd00::1]", a)).toBe(false);
    expect(socket("[fd00::1]80", a)).toBe(false);
    expect(a.family).toBe(FAMILY_NONE);
    expect(a.port).toBe(-1);
  });

  it("refuses malformed hosts", () => {
    const a = new Address();
    expect(socket("[fd00::1", a)).toBe(false);
    expect(socket(":80", a)).toBe(false);
    expect(socket("", a)).toBe(false);
    expect(socket("fd00::1:80", a)).toBe(false);
    expect(socket("[10.0.0.1]:80", a)).toBe(false);
    expect(socket("[fe80::1%eth0]:80", a)).toBe(false);
    expect(socket("10.0.0.300:80", a)).toBe(false);
    expect(socket("localhost:80", a)).toBe(false);
    expect(socket("[]:80", a)).toBe(false);
  });

  it("refuses garbage bytes, NUL bytes and over-long input without trapping", () => {
    const a = new Address();
    const garbage = rawBytes([0xff, 0x00, 0x5b, 0x3a, 0x5d, 0x3a, 0x80, 0x31]);
    expect(parseSocketAddress(changetype<usize>(garbage), garbage.byteLength, a)).toBe(false);
    const nul = rawBytes([0x31, 0x2e, 0x32, 0x2e, 0x33, 0x2e, 0x34, 0x00, 0x3a, 0x38]);
    expect(parseSocketAddress(changetype<usize>(nul), nul.byteLength, a)).toBe(false);
    expect(socket("1".repeat(100) + ":80", a)).toBe(false);
    expect(parseSocketAddress(0, 10, a)).toBe(false);
    expect(parseSocketAddress(changetype<usize>(garbage), -1, a)).toBe(false);
  });

  it("has a string form for tests and configuration", () => {
    const a = new Address();
    expect(parseSocketAddressString("[::1]:15008", a)).toBe(true);
    expect(a.port).toBe(15008);
  });
});

describe("formatAddress", () => {
  it("prints IPv4 with its port", () => {
    const a = ip("10.0.0.1");
    a.port = 80;
    expect(formatAddress(a)).toBe("10.0.0.1:80");
  });

  it("prints IPv6 in brackets, RFC 5952 compressed", () => {
    const a = ip("FD00:0:0:0:0:0:0:1");
    a.port = 80;
    expect(formatAddress(a)).toBe("[fd00::1]:80");
    expect(formatIp(ip("::"))).toBe("::");
    expect(formatIp(ip("::1"))).toBe("::1");
    expect(formatIp(ip("1::"))).toBe("1::");
    expect(formatIp(ip("1:0:0:2:0:0:0:3"))).toBe("1:0:0:2::3");
    expect(formatIp(ip("1:0:2:3:4:5:6:7"))).toBe("1:0:2:3:4:5:6:7");
    expect(formatIp(ip("2001:db8:0:0:1:0:0:1"))).toBe("2001:db8::1:0:0:1");
  });

  it("prints an IPv4-mapped address as IPv4 and round-trips the socket parser", () => {
    const a = new Address();
    expect(socket("[::ffff:10.1.2.3]:9376", a)).toBe(true);
    expect(formatAddress(a)).toBe("10.1.2.3:9376");
    const b = new Address();
    expect(socket("[fd00::a:b]:15008", b)).toBe(true);
    expect(formatAddress(b)).toBe("[fd00::a:b]:15008");
  });

  it("prints the IP alone without a port and nothing for an empty address", () => {
    expect(formatAddress(ip("fd00::1"))).toBe("fd00::1");
    expect(formatAddress(new Address())).toBe("");
  });
});

describe("writeAddress (hot path: into a reused buffer)", () => {
  it("writes exactly what formatAddress prints, for IPv4, IPv6 and the port edge cases", () => {
    const texts = [
      "10.0.0.1:80", "0.0.0.0:1", "255.255.255.255:65535", "[fd00::1]:80", "[::]:15008", "[::1]:9",
      "[1::]:8080", "[1:0:0:2:0:0:0:3]:1", "[1:0:2:3:4:5:6:7]:2", "[2001:db8:0:0:1:0:0:1]:443",
      "[ABCD:EF01:2345:6789:abcd:ef01:2345:6789]:10", "[::ffff:10.1.2.3]:9376", "[fd00:0:0:1::]:5",
    ];
    const out = new ByteText(16); // smaller than the longest text: it must grow, not overflow
    for (let i = 0; i < texts.length; i++) {
      const a = new Address();
      expect(parseSocketAddressString(texts[i], a)).toBe(true, texts[i]);
      writeAddress(a, out.clear());
      expect(out.toString()).toBe(formatAddress(a), texts[i]);
    }
    const bare = ip("fd00::a");
    expect(writeAddress(bare, out.clear()).toString()).toBe("fd00::a");
    expect(writeAddress(new Address(), out.clear()).length).toBe(0);
  });

  it("reuses its buffer: formatting many addresses allocates nothing once it is large enough", () => {
    const out = new ByteText();
    const a = new Address();
    expect(parseSocketAddressString("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:65535", a)).toBe(true);
    writeAddress(a, out.clear());
    const ptr = out.ptr;
    for (let i = 0; i < 1000; i++) {
      a.port = i + 1;
      writeAddress(a, out.clear());
    }
    expect(out.ptr).toBe(ptr);
    expect(out.toString()).toBe("[2001:db8:aaaa:bbbb:cccc:dddd:eeee:ffff]:1000");
  });
});

describe("ByteText", () => {
  it("writes strings as UTF-8 the way String.UTF8.encode does, and decimals", () => {
    const t = new ByteText(16);
    const text = "h\u00e9llo-\u4e16\ud83d\ude00:";
    t.string(text).decimal(0).byte(0x2c).decimal(4294967295);
    const expected = String.UTF8.encode(text + "0,4294967295");
    expect(t.equalsBytes(changetype<usize>(expected), expected.byteLength)).toBe(true);
  });
});
