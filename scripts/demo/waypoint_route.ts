// Demo scenario: waypoint_route. Healthy local waypoint, then the same service after a live
// update marks it unhealthy (failover through the east-west gateway to the remote waypoint,
// double HBONE), then a service whose only waypoint sits on a network without a gateway.
import { CLIENT_ADDRESS } from "../../tests/support/capture.js";
import { sleep } from "../../tests/support/envoy.js";
import { exchange } from "../../tests/support/tcp.js";
import { printCounters } from "./probe.js";
import { WaypointTopology } from "./waypoint_route_topology.js";

export async function waypointRouteScenario(): Promise<boolean> {
  console.log("== waypoint_route (envoy-configs/waypoint_route_*.yaml): waypoint failover across networks, double HBONE");
  const mesh = new WaypointTopology();
  await mesh.start();
  let ok = true;
  const show = (what: string, got: string, pass: boolean) => {
    ok &&= pass;
    console.log(`  ${what.padEnd(62)} -> ${got}${pass ? "" : "   <-- WRONG"}`);
  };
  const dial = async (vip: string) => (await exchange(vip, 80, "hello", 10_000, CLIENT_ADDRESS)).received.toString();
  try {
    const local = await dial("127.10.1.1");
    show("my-svc:80, local waypoint healthy", local.split("\n")[0] || "(closed)", local === "backend-net1\nhello");
    mesh.setLocalWaypointHealthy(false);
    let remote = "";
    for (let attempt = 0; attempt < 30 && !remote.startsWith("backend-net2"); attempt++) {
      await sleep(100);
      remote = await dial("127.10.1.1");
    }
    show("my-svc:80, local waypoint marked unhealthy (live ECDS update)", remote.split("\n")[0] || "(closed)", remote === "backend-net2\nhello");
    const isolated = await dial("127.10.1.3");
    show("isolated:80, only waypoint on net3 (no gateway)", isolated === "" ? "closed: error_no_valid_destination" : isolated, isolated === "");
    await sleep(100);
    console.log("  what each hop saw (access logs):");
    for (const [name, envoy] of [["local waypoint", mesh.localWaypoint], ["east-west gateway", mesh.gateway], ["remote waypoint", mesh.remoteWaypoint]] as const) {
      const lines = [...new Set(envoy.accessLog().split("\n").filter(Boolean).map((line) => line.replace(/ from=\S+/, "")))];
      for (const line of lines) console.log(`    ${name}: ${line}`);
    }
    printCounters(await mesh.client.stats(), "waypoint_route.");
  } finally {
    await mesh.stop();
  }
  return ok;
}
