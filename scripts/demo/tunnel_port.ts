// Demo scenario: tunnel_port. A client sidecar and two server sidecars (one per pod of
// my-service) joined by HBONE tunnels; the application dials service VIPs.
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { hboneConnect } from "../../tests/support/hbone.js";
import { exchange, startBackend } from "../../tests/support/tcp.js";
import { CERT_DIR, writeDemoCerts } from "../demo-certs.js";
import { printCounters } from "./probe.js";

/** The shipped server config is for pod 127.0.0.21; the same config serves the other pod. */
export function serverForPod(config: string, pod: string): string {
  return config.replaceAll("address: 127.0.0.21,", `address: ${pod},`).replace('"localWorkload": "127.0.0.21"', `"localWorkload": "${pod}"`);
}

export async function tunnelPortScenario(): Promise<boolean> {
  console.log("== tunnel_port (envoy-configs/tunnel_port_{client,server}.yaml): service port and target port across HBONE");
  await writeDemoCerts();
  const apps = [
    await startBackend("app-p1-9376", "127.0.0.21", 9376),
    await startBackend("app-p2-9377", "127.0.0.22", 9377),
    await startBackend("sentinel-7777", "127.0.0.21", 7777),
  ];
  const server = shippedConfig("tunnel_port_server.yaml");
  const servers = [
    await EnvoyProcess.start({ name: "demo-tunnel-p1", adminPort: 15000, adminAddress: "127.0.0.21", config: server }),
    await EnvoyProcess.start({ name: "demo-tunnel-p2", adminPort: 15000, adminAddress: "127.0.0.22", config: serverForPod(server, "127.0.0.22") }),
  ];
  const client = await EnvoyProcess.start({ name: "demo-tunnel-client", adminPort: 15000, config: shippedConfig("tunnel_port_client.yaml") });
  captureOutbound(15001);
  let ok = true;
  const show = (what: string, got: string, pass: boolean) => {
    ok &&= pass;
    console.log(`  ${what.padEnd(58)} -> ${got}${pass ? "" : "   <-- WRONG"}`);
  };
  try {
    for (const [expected, round] of [["app-p1-9376", 1], ["app-p2-9377", 2]] as const) {
      const reply = (await exchange("127.10.0.1", 80, "hello", 10_000, CLIENT_ADDRESS)).received.toString();
      show(`my-service:80, connection ${round} (round robin)`, reply.split("\n")[0] ?? "", reply === `${expected}\nhello`);
    }
    const allowed = (await exchange("127.10.0.2", 80, "hi", 10_000, CLIENT_ADDRESS)).received.toString();
    show("admin:80 (same target 9376; port 80 allowed)", allowed.split("\n")[0] ?? "", allowed === "app-p1-9376\nhi");
    const denied = (await exchange("127.10.0.2", 81, "hi", 10_000, CLIENT_ADDRESS)).received.toString();
    show("admin:81 (same target 9376; port 81 denied by RBAC)", denied === "" ? "refused, no byte from the app" : denied, denied === "");
    const forged = await hboneConnect("127.0.0.21:15008", "127.0.0.21:7777", { "x-tunnel-service-port": "80" }, CERT_DIR, "sidecar");
    const leaked = forged.received.toString().includes("sentinel");
    show("forged CONNECT 127.0.0.21:7777 (a port p1 does not serve)", leaked ? "REACHED 7777" : "refused by the server filter", !leaked);
    await new Promise((done) => setTimeout(done, 200));
    console.log("  what the server sidecars recorded (access log):");
    for (const [index, envoy] of servers.entries()) {
      for (const line of envoy.accessLog().split("\n").filter((l) => l.startsWith("app "))) console.log(`    p${index + 1}: ${line}`);
    }
    printCounters(await client.stats(), "tunnel_port.client.");
    printCounters(await servers[0]!.stats(), "tunnel_port.server.");
  } finally {
    releaseCapture();
    for (const envoy of [client, ...servers]) await envoy.stop();
    for (const app of apps) await app.close();
  }
  return ok;
}
