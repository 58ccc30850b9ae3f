// Demo scenario: passthrough_mtls in both modes, with a sidecar-style capture (iptables REDIRECT
// in the demo's private network namespace) and real mTLS pods on loopback addresses.
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { startTlsPod } from "../../tests/support/pods.js";
import { exchange, startBackend, type Backend } from "../../tests/support/tcp.js";
import { CERT_DIR, writeDemoCerts } from "../demo-certs.js";
import { printCounters } from "./probe.js";

interface Target {
  address: string;
  port: number;
  what: string;
  /** Expected first line from the pod, or "" when the connection must be refused. */
  expect: string;
}

const TARGETS: Target[] = [
  { address: "127.0.0.11", port: 8443, what: "mesh pod, tlsMode istio", expect: "httpbin-0 peer=URI:spiffe://cluster.local/ns/default/sa/sleep" },
  { address: "127.0.0.13", port: 8443, what: "mesh pod presenting a wrong identity", expect: "" },
  { address: "127.0.0.12", port: 8080, what: "mesh pod, tlsMode disabled", expect: "legacy-0" },
  { address: "127.0.0.14", port: 5432, what: "headless service db, pod db-0", expect: "db-0 peer=URI:spiffe://cluster.local/ns/default/sa/sleep" },
  { address: "127.0.0.30", port: 9000, what: "not a mesh pod", expect: "outside" },
];

async function startPods(): Promise<Backend[]> {
  await writeDemoCerts();
  return [
    await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a"),
    await startBackend("legacy-0", "127.0.0.12", 8080),
    await startTlsPod("reviews-0", "127.0.0.13", 8443, CERT_DIR, "pod-c"),
    await startTlsPod("db-0", "127.0.0.14", 5432, CERT_DIR, "pod-h"),
    await startBackend("outside", "127.0.0.30", 9000),
  ];
}

async function runMode(config: string): Promise<boolean> {
  console.log(`== passthrough_mtls (envoy-configs/${config}): the application dials pod IPs, the sidecar captures`);
  const pods = await startPods();
  const envoy = await EnvoyProcess.start({ name: "demo-passthrough-mtls", adminPort: 15000, config: shippedConfig(config) });
  captureOutbound(15001);
  let ok = true;
  try {
    for (const target of TARGETS) {
      const reply = await exchange(target.address, target.port, "hello", 10_000, CLIENT_ADDRESS);
      const text = reply.received.toString();
      const firstLine = text.split("\n")[0];
      const pass = target.expect === "" ? text === "" : firstLine === target.expect && text.endsWith("hello");
      ok &&= pass;
      const seen = target.expect === "" ? (text === "" ? "refused, nothing sent" : `UNEXPECTED: ${firstLine}`) : firstLine;
      console.log(`  ${`${target.address}:${target.port}`.padEnd(17)} ${target.what.padEnd(38)} -> ${seen}${pass ? "" : "   <-- WRONG"}`);
    }
    printCounters(await envoy.stats(), "passthrough_mtls.");
  } finally {
    releaseCapture();
    await envoy.stop();
    for (const pod of pods) await pod.close();
  }
  return ok;
}

export async function passthroughMtlsScenario(): Promise<boolean> {
  const direct = await runMode("passthrough_mtls.yaml");
  const subset = await runMode("passthrough_mtls_subset.yaml");
  return direct && subset;
}
