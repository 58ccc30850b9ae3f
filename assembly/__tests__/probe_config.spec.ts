import { parseProbeConfig } from "../../filters/probe/config";
import { hostOfAddress } from "../../filters/probe/address";

function parse(text: string): string {
  return parseProbeConfig(String.UTF8.encode(text)).error;
}

describe("probe configuration", () => {
  it("accepts routes and an optional default cluster", () => {
    const result = parseProbeConfig(String.UTF8.encode('{"routes":{"10.0.0.1":"a"},"default_cluster":"b"}'));
    const config = result.config;
    expect(result.error).toBe("");
    expect(config).not.toBeNull();
    if (config === null) return;
    expect(config.routes.has("10.0.0.1")).toBe(true);
    expect(config.defaultCluster).not.toBeNull();
  });

  it("refuses a missing routes field", () => {
    expect(parse("{}")).toBe("routes: missing required field");
  });

  it("refuses an unknown field and names it", () => {
    expect(parse('{"routes":{},"rutes":1}')).toBe("rutes: unknown field (known: routes, default_cluster)");
  });

  it("refuses an empty cluster name", () => {
    expect(parse('{"routes":{"10.0.0.1":""}}')).toBe('routes["10.0.0.1"]: cluster name must not be empty');
  });

  it("refuses text that is not JSON", () => {
    expect(parse("routes=1").length).toBeGreaterThan(0);
  });
});

describe("probe destination address", () => {
  it("strips the port from IPv4 and the brackets and port from IPv6", () => {
    expect(hostOfAddress("10.0.0.1:80")).toBe("10.0.0.1");
    expect(hostOfAddress("[fd00::1]:80")).toBe("fd00::1");
    expect(hostOfAddress("10.0.0.1")).toBe("10.0.0.1");
  });
});
