// The application of each docker-compose topology (services probe, passthrough-mtls,
// passthrough-mtls-subset, tunnel-port, waypoint-route; MESH_POD_SCENARIO picks the entry in
// scenarios.ts). It runs in its pod's network namespace (a `*-pod` service owns it, like a
// Kubernetes pause container) next to the Envoy sidecars: it starts the pods it serves itself,
// installs the sidecar-style capture (iptables REDIRECT of 127.0.0.100 to 15001), waits for
// every Envoy to be LIVE, dials each destination once, prints where it went and the filter's
// counters, and exits (0 when every answer is the one the README promises), so the next
// `docker compose up <topology>` runs it afresh. With live updates (waypoint_route) it stays
// and dials again each time the sidecar applies a new ECDS config, until Ctrl-C.
import { connect } from "node:net";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { sleep } from "../../tests/support/envoy.js";
import { exchange } from "../../tests/support/tcp.js";
import { CERT_DIR } from "../demo-certs.js";
import { counterLines, live, stats } from "./admin.mjs";
import { SCENARIOS, type Scenario } from "./scenarios.js";

const name = process.env.MESH_POD_SCENARIO ?? "";
const scenario = SCENARIOS[name];
if (!scenario) {
  console.error(`mesh-pod: MESH_POD_SCENARIO=${JSON.stringify(name)} is not one of ${Object.keys(SCENARIOS).join(", ")}`);
  process.exit(2);
}

function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((done) => {
    const socket = connect({ host, port });
    socket.once("connect", () => (socket.destroy(), done(true)));
    socket.once("error", () => done(false));
  });
}

async function waitUntil(what: string, check: () => Promise<boolean>): Promise<void> {
  for (let waited = 0; !(await check()); waited += 250) {
    if (waited === 10_000) console.log(`still waiting for ${what}`);
    await sleep(250);
  }
}

/** Dials every target; returns how many answered as expected (`judge`: print the verdict). */
async function dialAll(targets: Scenario["targets"], judge: boolean): Promise<number> {
  let asExpected = 0;
  for (const target of targets) {
    const reply = await exchange(target.address, target.port, "hello", 10_000, scenario!.capture ? CLIENT_ADDRESS : undefined);
    const text = reply.received.toString();
    const first = text.split("\n")[0] ?? "";
    const pass = target.expect === "" ? text === "" : first === target.expect && text.endsWith("hello");
    if (pass) asExpected++;
    const seen = text === "" ? "refused, nothing received" : first;
    const verdict = judge ? (pass ? "" : `   <-- WRONG, expected ${target.expect || "a refusal"}`) : "";
    console.log(`${`${target.address}:${target.port}`.padEnd(17)} ${target.what.padEnd(50)} -> ${seen}${verdict}`);
  }
  return asExpected;
}

/** The filter's counters that moved (the rest are 0), per Envoy. */
async function printCounters(): Promise<void> {
  for (const admin of scenario!.admins) {
    const lines = await counterLines(admin, scenario!.counters);
    for (const line of lines) if (!line.endsWith(" = 0")) console.log(`${admin.padEnd(17)} ${line}`);
  }
}

/** The sidecar's ECDS counters: `config_reload` moves when it applies a new extension config, `update_rejected` when it refuses one. */
async function ecds(): Promise<{ applied: number; refused: number }> {
  const counts = { applied: 0, refused: 0 };
  for (const [stat, value] of await stats(scenario!.admins[0]!)) {
    if (!stat.startsWith("extension_config_discovery.")) continue;
    if (stat.endsWith(".config_reload")) counts.applied += value;
    if (stat.endsWith(".update_rejected")) counts.refused += value;
  }
  return counts;
}

const pods = await scenario.startPods(CERT_DIR);
if (scenario.capture) {
  // The pod's namespace outlives this container: a rerun replaces the rules it left.
  releaseCapture();
  captureOutbound(15001);
}
for (const [host, port] of scenario.waitFor) await waitUntil(`${host}:${port}`, () => accepts(host, port));
for (const admin of scenario.admins) await waitUntil(`the Envoy at ${admin}`, () => live(admin));
console.log(`${name}: every Envoy is LIVE; dialling from ${scenario.capture ? `${CLIENT_ADDRESS} (captured to 127.0.0.1:15001)` : "the host network"}`);
const asExpected = await dialAll(scenario.targets, true);
await printCounters();
console.log(`${name}: ${asExpected} of ${scenario.targets.length} destinations answered as expected`);

if (!scenario.liveUpdates) {
  for (const pod of pods) await pod.close();
  process.exit(asExpected === scenario.targets.length ? 0 : 1);
}
console.log(`${name}: watching for live updates (replace envoy-configs/waypoint_route_plugin/waypoint_route.yaml); Ctrl-C to stop`);
let seen = await ecds();
for (;;) {
  await sleep(250);
  const now = await ecds().catch(() => seen);
  if (now.refused !== seen.refused) {
    console.log(`${name}: the sidecar refused the new plugin config (its log names the field); the previous one stays in force`);
  }
  if (now.applied !== seen.applied) {
    console.log(`${name}: the sidecar applied a new plugin config (ECDS reloads: ${now.applied}); dialling again`);
    await dialAll(scenario.targets, false);
    await printCounters();
  }
  seen = now;
}
