// The waypoint_route topology of tests/mesh/waypoint_route.test.ts (client sidecar with the ECDS
// plugin, local waypoint, the remote network's east-west gateway, remote waypoint; shipped
// configs) with the backends behind the two waypoints supplied by the caller, so load tests can
// put checksum servers there.
import { captureOutbound, releaseCapture } from "./capture.js";
import { EcdsPlugin } from "./ecds.js";
import { EnvoyProcess } from "./envoy.js";
import { shippedConfig } from "./envoy_yaml.js";
import { writeDemoCerts } from "../../scripts/demo-certs.js";
import { waypointAt } from "../../scripts/demo/waypoint_route_topology.js";

/** Where the backends behind the local (net1) and remote (net2) waypoints must listen. */
export const LOCAL_BACKEND = { host: "127.0.0.42", port: 9080 };
export const REMOTE_BACKEND = { host: "127.0.0.62", port: 9080 };
/** my-svc.default: a waypoint on net1 and one on net2 behind the gateway. */
export const WAYPOINT_VIP = { host: "127.10.1.1", port: 80 };

export class WaypointMesh {
  client!: EnvoyProcess;
  envoys: EnvoyProcess[] = [];
  plugin!: EcdsPlugin;

  async start(): Promise<void> {
    await writeDemoCerts();
    this.envoys.push(await EnvoyProcess.start({ name: "wpm-local", adminPort: 15000, adminAddress: "127.0.0.41", config: shippedConfig("waypoint_route_waypoint.yaml") }));
    this.envoys.push(await EnvoyProcess.start({ name: "wpm-remote", adminPort: 15000, adminAddress: "127.0.0.61", config: waypointAt("127.0.0.61", "127.0.0.62") }));
    this.envoys.push(await EnvoyProcess.start({ name: "wpm-eastwest", adminPort: 15000, adminAddress: "127.0.0.51", config: shippedConfig("waypoint_route_eastwest.yaml") }));
    this.plugin = new EcdsPlugin("envoy-configs/waypoint_route_plugin", "waypoint_route.yaml");
    this.client = await EnvoyProcess.start({ name: "wpm-client", adminPort: 15000, config: this.plugin.bootstrap(shippedConfig("waypoint_route_client.yaml")) });
    this.envoys.push(this.client);
    captureOutbound(15001);
  }

  /** Marks the local waypoint instance (default/waypoint-0) healthy or not: new connections fail over. */
  setLocalWaypointHealthy(healthy: boolean): void {
    this.plugin.update((mesh) => {
      for (const workload of mesh.workloads) if (workload.uid === "default/waypoint-0") workload.healthy = healthy;
    });
  }

  async stop(): Promise<void> {
    releaseCapture();
    for (const envoy of this.envoys) await envoy.stop();
  }
}
