import { createServer } from "node:http";
import { EnvoyProcess, sleep } from "./support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "./support/envoy_config.js";
const server = createServer((req, res) => {
  console.log("server got", req.method, req.url, JSON.stringify(req.headers));
  if (req.url === "/ok") { res.writeHead(200, { "content-type": "application/x-mesh-delta", "x-feed-version": "7" }); res.end("hello"); }
  else if (req.url === "/slow") { /* never */ }
  else if (req.url === "/reset") { res.writeHead(200, {"content-type":"text/plain"}); res.write("part"); setTimeout(() => req.socket.destroy(), 50); }
  else if (req.url === "/close") { req.socket.destroy(); }
  else if (req.url === "/404") { res.writeHead(404); res.end("nope"); }
  else if (req.url === "/trailers") { res.writeHead(200, {"Trailer":"x-t"}); res.write("ab"); res.addTrailers({"x-t":"1"}); res.end(); }
});
await new Promise<void>((r) => server.listen(18080, "127.0.0.1", r));
const calls = [
  "feed|/ok|2000", "feed|/slow|300", "feed|/reset|2000", "feed|/close|2000", "feed|/404|2000", "feed|/trailers|2000",
  "refused|/ok|2000", "nope|/ok|2000", "feed|/ok|2000|-", "feed|/ok|0",
];
const cfg = bootstrap({ adminPort: 15990, listeners: [listener({ name: "l", address: "127.0.0.1", port: 15991, filters: [
  wasmNetworkFilter({ name: "http_call_probe", wasm: "build/fixtures/http_call_probe.wasm", configuration: "tick=100;ticks=3;" + calls.map((c) => "call=" + c).join(";") }),
  tcpProxy("t", "feed")] })],
  clusters: [staticCluster("feed", "127.0.0.1", 18080), staticCluster("refused", "127.0.0.1", 18081)] });
const envoy = await EnvoyProcess.start({ name: "explore", adminPort: 15990, config: cfg });
await sleep(3000);
console.log(envoy.log().split("\n").filter((l) => /wasm/.test(l)).join("\n"));
await envoy.stop(); server.close();
