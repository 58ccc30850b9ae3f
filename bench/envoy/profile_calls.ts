// Counts what one plain-path connection makes each filter do, in the TypeScript host (host/):
// guest entries (callbacks Envoy calls, plus the guest's malloc when Envoy returns a value) and
// host calls the guest makes. Each guest entry is one V8 call from C++; each host call one call
// out of wasm into Envoy. Usage: npx tsx bench/envoy/profile_calls.ts (after npm run build and
// bench/envoy/profile.sh, which writes the fixtures to build/profile/wasm/).
import { existsSync } from "node:fs";
import { ProxyWasmHost } from "../../host/index.js";
import { pluginConfiguration } from "../../tests/support/envoy_yaml.js";
import { buildFixtures, FIXTURES } from "./profile_fixtures.js";

const fixtures = buildFixtures("build/profile/wasm");
const passthroughConfig = JSON.stringify(pluginConfiguration("passthrough_mtls.yaml", "passthrough_mtls"));
const cases = [
  ...FIXTURES.map((name) => ({ arm: name, wasm: fixtures[name], rootId: `profile_${name}`, config: "", destination: "127.0.0.12:8080" })),
  { arm: "noop", wasm: "build/noop.wasm", rootId: "noop", config: "", destination: "127.0.0.12:8080" },
  { arm: "passthrough (plain pod)", wasm: "build/passthrough_mtls.wasm", rootId: "passthrough_mtls", config: passthroughConfig, destination: "127.0.0.12:8080" },
  { arm: "passthrough (mtls pod)", wasm: "build/passthrough_mtls.wasm", rootId: "passthrough_mtls", config: passthroughConfig, destination: "127.0.0.11:8443" },
];
for (const c of cases) {
  if (!existsSync(c.wasm)) throw new Error(`${c.wasm} missing: npm run build`);
  const host = await ProxyWasmHost.fromFile(c.wasm, { rootId: c.rootId, pluginConfiguration: c.config, recordCalls: true, logLevel: "warn" });
  if (!host.start()) throw new Error(`${c.arm}: ${host.startFailure}`);
  host.connect({ destination: c.destination, source: "127.0.0.1:40000" }).end(); // warm: pools, lazy state
  const callsBefore = host.calls.length;
  const hostBefore = host.hostCalls;
  const conn = host.connect({ destination: c.destination, source: "127.0.0.1:40001" });
  conn.downstreamData("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
  conn.upstreamData("HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nok\n", true);
  conn.end();
  const entries = host.calls.slice(callsBefore).filter((call) => call.vm !== "canary").map((call) => call.fn);
  console.log(JSON.stringify({ arm: c.arm, guest_entries: entries.length, host_calls: host.hostCalls - hostBefore, entries }));
}
