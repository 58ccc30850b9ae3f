// passthrough_mtls with a 100k-pod mesh snapshot in the real Envoy: the shipped config with the
// generated snapshot (bench/lib/mesh_snapshot.ts) as its plugin configuration and one cluster per
// headless service, as a control plane would send. Measures start → ready (Envoy parses the
// config, compiles the module, and configures the plugin twice: the canary VM, then the real
// one), the filter's own "configured" log lines, memory (server.memory_allocated and RSS), and
// then proves routing: real pods listen on a few snapshot addresses (10.0.0.0/8 is made local
// inside the private netns) and captured connections must reach them the way the snapshot says:
// mTLS pods over mTLS with the sidecar's identity, a headless member through its service's
// cluster, a tlsMode-disabled pod and a remote-network-only address in clear.
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { parse } from "yaml";
import { emit } from "../emit.js";
import { buildSnapshot } from "../lib/mesh_snapshot.js";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { createCa, spiffe } from "../../tests/support/certs.js";
import { EnvoyProcess, sleep } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { startTlsPod } from "../../tests/support/pods.js";
import { exchange, startBackend, type Backend } from "../../tests/support/tcp.js";
import { makePrefixLocal } from "./capture.js";
import { rssMb } from "./proc.js";

const FILTER = "passthrough_mtls";
const ADMIN_PORT = 15000;
const OUTBOUND_PORT = 15001;
const SIDECAR_IDENTITY = spiffe("default", "sleep");
const CERT_DIR = join(REPO_ROOT, ".tmp", "bench-100k-certs");

interface Probe {
  /** IP:PORT the application dials. */
  destination: string;
  /** The counter this connection must bump. */
  counter: "mtls" | "headless" | "plaintext_pod" | "passthrough";
  /** What the pod must send back (banner, then the echoed payload). */
  expected(payload: string): string;
}

/** Milliseconds of an Envoy log line's "[YYYY-MM-DD hh:mm:ss.mmm]" timestamp (same day). */
function logTime(line: string): number {
  const match = /^\[\d{4}-\d\d-\d\d (\d\d):(\d\d):(\d\d)\.(\d{3})\]/.exec(line);
  return match ? ((Number(match[1]) * 60 + Number(match[2])) * 60 + Number(match[3])) * 1000 + Number(match[4]) : NaN;
}

function splitAddress(destination: string): { host: string; port: number } {
  const colon = destination.lastIndexOf(":");
  return { host: destination.slice(0, colon), port: Number(destination.slice(colon + 1)) };
}

/** The shipped config carrying the snapshot, its headless clusters and this run's certificates. */
function sidecarConfig(snapshotText: string, headless: Array<{ hostname: string; port: number }>): string {
  const config = parse(shippedConfig("passthrough_mtls.yaml"));
  config.admin.address.socket_address.port_value = ADMIN_PORT;
  config.static_resources.listeners[0].address.socket_address.port_value = OUTBOUND_PORT;
  const wasm = config.static_resources.listeners[0].filter_chains[0].filters[0].typed_config.config;
  wasm.configuration.value = snapshotText;
  const mtls = config.static_resources.clusters.find((cluster: any) => cluster.name === "outbound_mtls_passthrough");
  const context = mtls.transport_socket.typed_config.common_tls_context;
  context.tls_certificates = [{ certificate_chain: { filename: join(CERT_DIR, "sidecar.crt") }, private_key: { filename: join(CERT_DIR, "sidecar.key") } }];
  context.validation_context = { trusted_ca: { filename: join(CERT_DIR, "ca.crt") } };
  const headlessClusters = headless.map(({ hostname, port }) => ({ ...structuredClone(mtls), name: `outbound|${port}||${hostname}` }));
  config.static_resources.clusters = [
    config.static_resources.clusters.find((cluster: any) => cluster.name === "PassthroughCluster"),
    mtls,
    ...headlessClusters,
  ];
  // JSON is YAML: one line per value, no block scalar of 20 MB for the YAML writer to fold.
  return JSON.stringify(config);
}

export async function pods100k(pods: number, log: (message: string) => void): Promise<void> {
  const snapshot = buildSnapshot(pods);
  const snapshotText = Buffer.from(snapshot.config).toString("utf8");
  const model = JSON.parse(snapshotText);
  const identityOf = new Map<string, string>();
  for (const workload of model.workloads) if (!workload.network && workload.identity) identityOf.set(workload.addresses[0], workload.identity);
  const headless = [...new Map(snapshot.headlessMembers.map((m) => [`${m.hostname}:${m.port}`, { hostname: m.hostname, port: m.port }])).values()];

  // Real pods on a few snapshot addresses.
  makePrefixLocal("10.0.0.0/8");
  mkdirSync(CERT_DIR, { recursive: true });
  const ca = await createCa(CERT_DIR, "ca");
  await ca.issue("sidecar", [SIDECAR_IDENTITY]);
  const servers: Backend[] = [];
  const probes: Probe[] = [];
  const tlsPod = async (destination: string, counter: "mtls" | "headless", index: number) => {
    const { host, port } = splitAddress(destination);
    const identity = identityOf.get(host);
    if (!identity) throw new Error(`snapshot has no local identity for ${host}`);
    const name = `pod-${index}`;
    await ca.issue(name, [identity]);
    servers.push(await startTlsPod(name, host, port, CERT_DIR, name));
    probes.push({ destination, counter, expected: (payload) => `${name} peer=URI:${SIDECAR_IDENTITY}\n${payload}` });
  };
  const plainPod = async (destination: string, counter: "plaintext_pod" | "passthrough", name: string) => {
    const { host, port } = splitAddress(destination);
    servers.push(await startBackend(name, host, port));
    probes.push({ destination, counter, expected: (payload) => `${name}\n${payload}` });
  };
  let envoy: EnvoyProcess | undefined;
  try {
    for (let i = 0; i < 3; i++) await tlsPod(snapshot.destinations.mtls[i]!, "mtls", i);
    await tlsPod(snapshot.destinations.headless[0]!, "headless", 3);
    await plainPod(snapshot.destinations.plaintext_pod[0]!, "plaintext_pod", "plain-pod");
    const remoteOnly = snapshot.destinations.not_a_pod.find((destination) => destination.startsWith("10."));
    if (remoteOnly) await plainPod(remoteOnly, "passthrough", "remote-only");

    const config = sidecarConfig(snapshotText, headless);
    log(`${pods} pods: ${(snapshot.config.length / 1e6).toFixed(1)} MB of plugin config, ${headless.length} headless clusters; starting Envoy`);
    const started = process.hrtime.bigint();
    envoy = await EnvoyProcess.start({ name: "bench-100k", adminPort: ADMIN_PORT, config, logLevel: "info", readyTimeoutMs: 180_000 });
    const loadMs = Number(process.hrtime.bigint() - started) / 1e6;
    // One "configured" line per VM: the canary, the main thread's and each worker's (1 here).
    // The worker's may land in the log file just after /ready answers: wait for it a little.
    const configuredLines = (text: string) => text.split("\n").filter((line) => line.includes("configured:") && line.includes("workloads"));
    for (let waited = 0; configuredLines(envoy.log()).length < 3 && waited < 5000; waited += 100) await sleep(100);
    const lines = envoy.log().split("\n");
    const configured = configuredLines(envoy.log());
    const firstLine = logTime(lines[0] ?? "");
    const configureMs = configured.map((line) => Math.round(logTime(line) - firstLine));
    // Envoy logs "loading N static secret(s)" right after it parsed the bootstrap file (here a
    // 25 MB YAML file; a control plane would send protobuf instead).
    const parsedLine = lines.find((line) => line.includes("static secret(s)"));
    const bootstrapParsedMs = parsedLine ? Math.round(logTime(parsedLine) - firstLine) : undefined;

    captureOutbound(OUTBOUND_PORT);
    let ok = 0;
    const failures: string[] = [];
    const before = await envoy.stats();
    for (const probe of probes) {
      const { host, port } = splitAddress(probe.destination);
      const payload = `hello ${probe.destination}`;
      const reply = await exchange(host, port, payload, 10_000, CLIENT_ADDRESS);
      if (reply.received.toString() === probe.expected(payload)) ok++;
      else failures.push(`${probe.destination} (${probe.counter}): got ${JSON.stringify(reply.received.toString().slice(0, 120))}`);
    }
    const after = await envoy.waitForStats((s) => (s.get(`wasmcustom.${FILTER}.mtls`) ?? 0) >= 3, 2000);
    // A tlsMode-disabled pod is a passthrough too: it bumps both plaintext_pod and passthrough.
    const bumps = (probe: Probe, counter: string) => probe.counter === counter || (counter === "passthrough" && probe.counter === "plaintext_pod");
    for (const counter of new Set(probes.map((probe) => probe.counter))) {
      const expected = probes.filter((probe) => bumps(probe, counter)).length;
      const name = `wasmcustom.${FILTER}.${counter}`;
      const seen = (after.get(name) ?? 0) - (before.get(name) ?? 0);
      if (seen !== expected) failures.push(`${name} grew by ${seen}, expected ${expected}`);
    }
    if (failures.length) log(`routing mismatches: ${failures.join("; ")}`);
    emit({
      figure: "envoy_100k_pods",
      pods,
      config_bytes: snapshot.config.length,
      load_ms: Math.round(loadMs),
      envoy_memory_mb: Math.round(((after.get("server.memory_allocated") ?? NaN) / (1 << 20)) * 10) / 10,
      rss_mb: Math.round(rssMb(envoy.child.pid!) * 10) / 10,
      configure_log_lines: configured.length,
      bootstrap_parsed_at_ms: bootstrapParsedMs,
      configured_at_ms: configureMs,
      connections_ok: ok,
      connections_tried: probes.length,
      failures: failures.length ? failures : undefined,
    });
  } finally {
    try {
      releaseCapture();
    } catch {
      // outside the netns nothing was captured
    }
    await envoy?.stop();
    // Its work directory holds a 25 MB config: do not leave one behind per run.
    if (envoy) rmSync(envoy.dir, { recursive: true, force: true });
    for (const server of servers) await server.close();
  }
}
