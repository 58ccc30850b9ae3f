// The main demo: the real Envoy with the built filters routing real traffic on loopback, and a
// readable summary of what happened. `npm run demo` sets everything up and runs it inside a
// private network namespace (scripts/in-netns.sh), where it may capture traffic like a sidecar.
import { passthroughMtlsScenario } from "./demo/passthrough_mtls.js";
import { feedScenario } from "./demo/feed.js";
import { probeScenario } from "./demo/probe.js";
import { tunnelPortScenario } from "./demo/tunnel_port.js";
import { waypointRouteScenario } from "./demo/waypoint_route.js";

const results = [await probeScenario(), await passthroughMtlsScenario(), await tunnelPortScenario(), await waypointRouteScenario(), await feedScenario()];
const ok = results.every(Boolean);
console.log(ok ? "demo: every connection went where the filters said, bytes intact" : "demo: FAILED (see <-- WRONG)");
process.exit(ok ? 0 : 1);
