// The waypoint_route topology shared by its end-to-end test and the demo: a client sidecar
// (ECDS plugin in a private copy of envoy-configs/waypoint_route_plugin/, so updates never touch
// the repository), a local waypoint, the remote network's east-west gateway, a remote waypoint,
// and a backend behind each waypoint. All on loopback, inside the caller's private netns.
import { mkdirSync, mkdtempSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { REPO_ROOT } from "../../tests/support/paths.js";
import { startBackend, type Backend } from "../../tests/support/tcp.js";
import { writeDemoCerts } from "../demo-certs.js";

const PLUGIN_DIR = "envoy-configs/waypoint_route_plugin";
const PLUGIN_FILE = "waypoint_route.yaml";

/** The shipped waypoint (127.0.0.41, backend .42) moved to other addresses. */
export function waypointAt(address: string, backend: string): string {
  return shippedConfig("waypoint_route_waypoint.yaml")
    .replaceAll("address: 127.0.0.41,", `address: ${address},`)
    .replaceAll("address: 127.0.0.42,", `address: ${backend},`);
}

/** The shipped gateway presenting another certificate (for the wrong-identity refusal). */
export function gatewayWithCert(cert: string): string {
  return shippedConfig("waypoint_route_eastwest.yaml").replaceAll("build/certs/eastwest.", `build/certs/${cert}.`);
}

export class WaypointTopology {
  client!: EnvoyProcess;
  localWaypoint!: EnvoyProcess;
  gateway!: EnvoyProcess;
  remoteWaypoint!: EnvoyProcess;
  backends: Backend[] = [];
  private pluginDir = "";
  private version = 1;

  async start(): Promise<void> {
    await writeDemoCerts();
    this.backends = [await startBackend("backend-net1", "127.0.0.42", 9080), await startBackend("backend-net2", "127.0.0.62", 9080)];
    this.localWaypoint = await EnvoyProcess.start({ name: "wp-local", adminPort: 15000, adminAddress: "127.0.0.41", config: shippedConfig("waypoint_route_waypoint.yaml") });
    this.remoteWaypoint = await EnvoyProcess.start({ name: "wp-remote", adminPort: 15000, adminAddress: "127.0.0.61", config: waypointAt("127.0.0.61", "127.0.0.62") });
    this.gateway = await EnvoyProcess.start({ name: "eastwest", adminPort: 15000, adminAddress: "127.0.0.51", config: shippedConfig("waypoint_route_eastwest.yaml") });
    mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
    this.pluginDir = mkdtempSync(join(REPO_ROOT, ".tmp", "waypoint-plugin-"));
    writeFileSync(join(this.pluginDir, PLUGIN_FILE), readFileSync(join(REPO_ROOT, PLUGIN_DIR, PLUGIN_FILE), "utf8"));
    const client = shippedConfig("waypoint_route_client.yaml").replaceAll(PLUGIN_DIR, this.pluginDir);
    this.client = await EnvoyProcess.start({ name: "wp-client", adminPort: 15000, config: client });
    captureOutbound(15001);
  }

  /** The plugin's mesh snapshot (JSON) as currently deployed. */
  snapshot(): any {
    const text = readFileSync(join(this.pluginDir, PLUGIN_FILE), "utf8");
    const value = /value: \|\n([\s\S]*)$/.exec(text)?.[1] ?? "";
    return JSON.parse(value);
  }

  /** Pushes a new plugin configuration (any text) to the running client, as ECDS sees it: an atomic rename. */
  push(configuration: string): void {
    const text = readFileSync(join(this.pluginDir, PLUGIN_FILE), "utf8");
    const head = text.slice(0, text.indexOf("value: |") + "value: |".length);
    const body = configuration.split("\n").map((line) => `            ${line}`).join("\n");
    const next = head.replace(/version_info: "\d+"/, `version_info: "${++this.version}"`) + "\n" + body + "\n";
    const staging = join(this.pluginDir, `.${PLUGIN_FILE}.next`);
    writeFileSync(staging, next);
    renameSync(staging, join(this.pluginDir, PLUGIN_FILE));
  }

  /** Marks the local waypoint instance healthy or not in a new snapshot. */
  setLocalWaypointHealthy(healthy: boolean): void {
    const mesh = this.snapshot();
    for (const workload of mesh.workloads) if (workload.uid === "default/waypoint-0") workload.healthy = healthy;
    this.push(JSON.stringify(mesh, null, 2));
  }

  async replaceGateway(config: string): Promise<void> {
    await this.gateway.stop();
    this.gateway = await EnvoyProcess.start({ name: "eastwest", adminPort: 15000, adminAddress: "127.0.0.51", config });
  }

  async stop(): Promise<void> {
    releaseCapture();
    for (const envoy of [this.client, this.localWaypoint, this.gateway, this.remoteWaypoint]) await envoy?.stop();
    for (const backend of this.backends) await backend.close();
  }
}
