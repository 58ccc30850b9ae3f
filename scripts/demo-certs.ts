// Writes the demo mesh's certificates to build/certs (once; --force rewrites): a mesh CA, the
// sidecar's own identity, the mesh feed's, and one certificate per demo pod with its SPIFFE URI SAN. The shipped
// Envoy configs reference these files, so `envoy --mode validate` and the demo can load them.
// Test-only material: the keys are written in clear and never leave build/.
import { existsSync } from "node:fs";
import { createCa, spiffe } from "../tests/support/certs.js";

export const CERT_DIR = "build/certs";

/** Demo identities: file name → SPIFFE URI SAN. pod-c's certificate deliberately carries an
 *  identity other than the one the mesh configuration gives it. */
export const DEMO_IDENTITIES: Record<string, string> = {
  sidecar: spiffe("default", "sleep"),
  "pod-a": spiffe("default", "httpbin"),
  "pod-c": spiffe("default", "imposter"),
  "pod-h": spiffe("default", "db"),
  // tunnel_port's server pods (both endpoints of my-service run as its service account).
  "my-service": spiffe("default", "my-service"),
  // waypoint_route: waypoints (local and remote share the waypoint service's identity), the
  // remote network's east-west gateway, and an impostor gateway for the refusal test.
  waypoint: spiffe("default", "waypoint"),
  eastwest: spiffe("istio-system", "eastwest"),
  "eastwest-rogue": spiffe("istio-system", "not-eastwest"),
  // The mesh feed's workload identity: what its channel presents and mesh_feed clusters pin.
  feed: spiffe("mesh-feed", "mesh-feed"),
};

export async function writeDemoCerts(force = false): Promise<void> {
  const complete = ["ca", ...Object.keys(DEMO_IDENTITIES)].every((name) => existsSync(`${CERT_DIR}/${name}.crt`));
  if (!force && complete) return;
  const ca = await createCa(CERT_DIR, "ca");
  for (const [name, identity] of Object.entries(DEMO_IDENTITIES)) await ca.issue(name, [identity]);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  await writeDemoCerts(process.argv.includes("--force"));
  console.log(`certificates in ${CERT_DIR}`);
}
