// Demo scenario: the probe filter picks tcp_proxy's cluster from the destination.
import { randomBytes } from "node:crypto";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { exchange, startBackend } from "../../tests/support/tcp.js";

export async function probeScenario(): Promise<boolean> {
  console.log("== probe: pick tcp_proxy's cluster from the destination (envoy-configs/probe.yaml)");
  const backends = await Promise.all([
    startBackend("backend_a", "127.0.0.1", 18081),
    startBackend("backend_b", "127.0.0.1", 18082),
    startBackend("backend_default", "127.0.0.1", 18083),
  ]);
  const envoy = await EnvoyProcess.start({ name: "demo-probe", adminPort: 9901, config: shippedConfig("probe.yaml") });
  let ok = true;
  try {
    for (const destination of ["127.0.0.2", "127.0.0.3", "127.0.0.4"]) {
      const payload = randomBytes(32 * 1024);
      const reply = await exchange(destination, 10000, payload);
      const banner = reply.received.subarray(0, reply.received.indexOf(10)).toString();
      const intact = reply.received.subarray(banner.length + 1).equals(payload);
      ok &&= intact && !reply.errored;
      console.log(`  ${destination}:10000 -> answered by ${banner.padEnd(16)} ${payload.length} bytes ${intact ? "round-tripped unchanged" : "CORRUPTED"}`);
    }
    printCounters(await envoy.stats(), "probe.");
  } finally {
    await envoy.stop();
    await Promise.all(backends.map((backend) => backend.close()));
  }
  return ok;
}

export function printCounters(stats: Map<string, number>, prefix: string): void {
  console.log("  counters in Envoy /stats:");
  for (const [name, value] of stats) if (name.startsWith(`wasmcustom.${prefix}`)) console.log(`    ${name} = ${value}`);
}
