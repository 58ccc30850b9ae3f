// Envoy admin reads for the compose applications, in plain JavaScript so that `node` alone runs
// it: neither the Envoy image nor the node image has curl. As a command it prints the filter's
// counters: docker compose run --rm <topology> node scripts/compose/admin.mjs [prefix] [host:port]
import { pathToFileURL } from "node:url";

/** Envoy's counters and gauges as name -> value (histograms left out). */
export async function stats(admin) {
  const response = await fetch(`http://${admin}/stats`);
  const values = new Map();
  for (const line of (await response.text()).split("\n")) {
    const match = /^(\S+): (\d+)$/.exec(line);
    if (match) values.set(match[1], Number(match[2]));
  }
  return values;
}

/** True once the Envoy at `admin` answers /ready with LIVE. */
export async function live(admin) {
  try {
    const response = await fetch(`http://${admin}/ready`);
    return (await response.text()).trim() === "LIVE";
  } catch {
    return false;
  }
}

/** The wasm filter's counters whose name (after `wasmcustom.`) starts with `prefix`, as printable lines. */
export async function counterLines(admin, prefix) {
  const lines = [];
  for (const [name, value] of await stats(admin)) {
    if (name.startsWith(`wasmcustom.${prefix}`)) lines.push(`counter ${name} = ${value}`);
  }
  return lines;
}

const DEFAULTS = {
  probe: ["probe.", "127.0.0.1:9901"],
  passthrough_mtls: ["passthrough_mtls.", "127.0.0.1:15000"],
  passthrough_mtls_subset: ["passthrough_mtls.", "127.0.0.1:15000"],
  tunnel_port: ["tunnel_port.", "127.0.0.1:15000"],
  waypoint_route: ["waypoint_route.", "127.0.0.1:15000"],
};

if (import.meta.url === pathToFileURL(process.argv[1] ?? "").href) {
  const [defaultPrefix, defaultAdmin] = DEFAULTS[process.env.MESH_POD_SCENARIO ?? ""] ?? ["", "127.0.0.1:15000"];
  const [prefix = defaultPrefix, admin = defaultAdmin] = process.argv.slice(2);
  try {
    for (const line of await counterLines(admin, prefix)) console.log(line);
  } catch (error) {
    console.error(`admin: cannot read http://${admin}/stats: ${error.cause?.code ?? error.message}`);
    process.exit(1);
  }
}
