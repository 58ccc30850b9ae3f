import { createServer } from "node:http";
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { EnvoyProcess, sleep } from "./support/envoy.js";
import { scratchDir } from "./support/paths.js";
import { bootstrap, staticCluster, tcpProxy } from "./support/envoy_config.js";
const t0 = Date.now();
const server = createServer((req, res) => {
  console.log(Date.now() - t0, "server got", req.url);
  req.on("close", () => console.log(Date.now() - t0, "request closed", req.url, "ended:", res.writableEnded));
});
await new Promise<void>((r) => server.listen(18080, "127.0.0.1", r));
const dir = scratchDir("ecds-probe-");
function push(version: number, conf: string) {
  const text = JSON.stringify({ version_info: String(version), resources: [{ "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig", name: "probe", typed_config: {
    "@type": "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm", config: { name: "probe", root_id: "http_call_probe",
      configuration: { "@type": "type.googleapis.com/google.protobuf.StringValue", value: conf },
      vm_config: { vm_id: "probe", runtime: "envoy.wasm.runtime.v8", code: { local: { filename: "build/fixtures/http_call_probe.wasm" } } } } } }] });
  writeFileSync(join(dir, ".next"), text); renameSync(join(dir, ".next"), join(dir, "probe.json"));
}
push(1, "tick=100;ticks=2;call=feed|/slow|20000");
const cfg: any = bootstrap({ adminPort: 15990, listeners: [{ name: "l", address: { socket_address: { address: "127.0.0.1", port_value: 15991 } }, filter_chains: [{ filters: [
  { name: "probe", config_discovery: { config_source: { path_config_source: { path: join(dir, "probe.json"), watched_directory: { path: dir } } }, type_urls: ["type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm"] } },
  tcpProxy("t", "feed")] }] }],
  clusters: [staticCluster("feed", "127.0.0.1", 18080)] });
cfg.node = { id: "probe-node", cluster: "probe-cluster" };
const envoy = await EnvoyProcess.start({ name: "explore2", adminPort: 15990, config: cfg });
await sleep(1500);
console.log(Date.now() - t0, "pushing v2");
push(2, "tick=100;ticks=2");
await sleep(2500);
console.log(envoy.log().split("\n").filter((l) => /wasm log/.test(l)).map((l) => l.replace(/\[source.*?\]/, "")).join("\n"));
await envoy.stop(); server.close();
