// proxy_http_call, proxy_on_http_call_response and the tick timer in the real Envoy 1.40.0:
// the facts the test host emulates (tests/support/http_call_facts.ts, tests/host/http_call.test.ts)
// measured here on a loopback upstream, per VM, with two workers; and what happens to a pending
// call when a configuration update deletes its root (ECDS from a watched file).
import assert from "node:assert/strict";
import { renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy, wasmNetworkFilter } from "../support/envoy_config.js";
import { CallUpstream, checkProbeFacts, checkUpstreamFacts, PROBE_CONFIGURATION } from "../support/http_call_facts.js";
import { scratchDir } from "../support/paths.js";
import { freePort } from "../support/ports.js";
import { ensureBuilt } from "../host/helpers.js";

const WASM = "build/fixtures/http_call_probe.wasm";

/** The probe's log lines by Envoy thread id (one VM per thread: main and each worker). */
function linesByThread(log: string): Map<string, string[]> {
  const out = new Map<string, string[]>();
  for (const line of log.split("\n")) {
    const m = /^\[[^\]]+\]\[(\d+)\]\[\w+\]\[wasm\].*wasm log [^:]+: (.*)$/.exec(line);
    if (!m) continue;
    if (!out.has(m[1])) out.set(m[1], []);
    out.get(m[1])!.push(m[2]);
  }
  return out;
}

describe("Envoy 1.40.0: HTTP calls and ticks from a root context", () => {
  let upstream: CallUpstream;
  let refusedPort: number;
  before(async () => {
    ensureBuilt("http_call_probe");
    upstream = await CallUpstream.start();
    refusedPort = await freePort(); // nothing listens there
  });
  after(() => upstream.close());

  it("answers each outcome the way the host emulates it, in every VM (main thread and 2 workers)", async () => {
    const [admin, port] = [await freePort(), await freePort()];
    const config = bootstrap({
      adminPort: admin,
      listeners: [listener({ name: "probe", address: "127.0.0.1", port, filters: [
        wasmNetworkFilter({ name: "http_call_probe", wasm: WASM, configuration: PROBE_CONFIGURATION }),
        tcpProxy("probe", "feed"),
      ] })],
      clusters: [staticCluster("feed", "127.0.0.1", upstream.port), staticCluster("refused", "127.0.0.1", refusedPort)],
    });
    const envoy = await EnvoyProcess.start({ name: "http-call", adminPort: admin, config, concurrency: 2 });
    try {
      await sleep(1500); // three ticks of 100 ms, the 300 ms timeout, margin for a loaded machine
      const threads = [...linesByThread(envoy.log())].filter(([, lines]) => lines.some((l) => l.startsWith("tick ")));
      assert.equal(threads.length, 3, "each of the 3 VMs (main thread + 2 workers) ticks on its own timer");
      for (const [thread, lines] of threads) checkProbeFacts(lines, `Envoy thread ${thread}`);
      checkUpstreamFacts(upstream, 3);
    } finally {
      await envoy.stop();
    }
  });

  it("cancels a pending call when a configuration update deletes its root: no callback", async () => {
    const dir = scratchDir("http-call-ecds-");
    let version = 0;
    const push = (configuration: string) => {
      const resource = {
        version_info: String(++version),
        resources: [{
          "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig",
          name: "http_call_probe",
          typed_config: (wasmNetworkFilter({ name: "http_call_probe", wasm: WASM, configuration }) as { typed_config: object }).typed_config,
        }],
      };
      writeFileSync(join(dir, ".next"), JSON.stringify(resource));
      renameSync(join(dir, ".next"), join(dir, "probe.json"));
    };
    push("tick=100;ticks=2;call=feed|/hold|20000");
    const [admin, port] = [await freePort(), await freePort()];
    const config = bootstrap({
      adminPort: admin,
      listeners: [listener({ name: "probe", address: "127.0.0.1", port, filters: [
        { name: "http_call_probe", config_discovery: {
          config_source: { path_config_source: { path: join(dir, "probe.json"), watched_directory: { path: dir } } },
          type_urls: ["type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm"],
        } },
        tcpProxy("probe", "feed"),
      ] })],
      clusters: [staticCluster("feed", "127.0.0.1", upstream.port)],
    });
    (config as Record<string, unknown>).node = { id: "http-call-probe", cluster: "http-call-probe" };
    const envoy = await EnvoyProcess.start({ name: "http-call-ecds", adminPort: admin, config, componentLogLevel: "wasm:debug" });
    try {
      const held = () => upstream.seen.filter((s) => s.path === "/hold").length;
      for (let i = 0; i < 100 && held() < 2; i++) await sleep(50);
      assert.equal(held(), 2, "both VMs (main thread and the worker) hold a call");
      push("tick=100;ticks=2");
      for (let i = 0; i < 100 && upstream.cancelled.filter((p) => p === "/hold").length < 2; i++) await sleep(50);
      assert.equal(upstream.cancelled.filter((p) => p === "/hold").length, 2, "Envoy closed both held requests without an answer");
      await sleep(300);
      const log = envoy.log();
      assert.equal((log.match(/deleted root 1/g) ?? []).length, 2, "root 1 deleted in both VMs");
      assert.ok(/tick 1 root 2/.test(log), "the new root ticks");
      assert.doesNotMatch(log, /response token=/, "no callback for the cancelled call");
      assert.doesNotMatch(log, /which is no live root/, "Envoy did not call back a deleted root");
    } finally {
      await envoy.stop();
    }
  });
});
