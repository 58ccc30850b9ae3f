// The main demo: the real Envoy with the built filters routing real traffic on loopback, and a
// readable summary of what happened. Run with `npm run demo` (it sets everything up first).
import { randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { EnvoyProcess } from "../tests/support/envoy.js";
import { exchange, startBackend } from "../tests/support/tcp.js";

const ADMIN_PORT = 9901;

async function probeScenario(): Promise<boolean> {
  console.log("== probe: pick tcp_proxy's cluster from the destination (envoy-configs/probe.yaml)");
  const backends = await Promise.all([
    startBackend("backend_a", "127.0.0.1", 18081),
    startBackend("backend_b", "127.0.0.1", 18082),
    startBackend("backend_default", "127.0.0.1", 18083),
  ]);
  const envoy = await EnvoyProcess.start({
    name: "demo-probe",
    adminPort: ADMIN_PORT,
    config: readFileSync("envoy-configs/probe.yaml", "utf8"),
  });
  let ok = true;
  try {
    for (const destination of ["127.0.0.2", "127.0.0.3", "127.0.0.4"]) {
      const payload = randomBytes(32 * 1024);
      const reply = await exchange(destination, 10000, payload);
      const banner = reply.received.subarray(0, reply.received.indexOf(10)).toString();
      const echoed = reply.received.subarray(banner.length + 1);
      const intact = echoed.equals(payload);
      ok &&= intact && !reply.errored;
      console.log(`  ${destination}:10000 -> answered by ${banner.padEnd(16)} ${payload.length} bytes ${intact ? "round-tripped unchanged" : "CORRUPTED"}`);
    }
    const stats = await envoy.stats();
    console.log("  counters in Envoy /stats:");
    for (const [name, value] of stats) if (/probe\.(routed|defaulted|unmatched|no_destination|filter_state_refused)$/.test(name)) console.log(`    ${name} = ${value}`);
  } finally {
    await envoy.stop();
    await Promise.all(backends.map((backend) => backend.close()));
  }
  return ok;
}

const ok = await probeScenario();
console.log(ok ? "demo: every connection went where the filter said, bytes intact" : "demo: FAILED");
process.exit(ok ? 0 : 1);
