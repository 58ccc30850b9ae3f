// A real Envoy (the pinned .venv/envoy) running what istiod generated for one sidecar
// (xds_files.ts), with the mesh of tests/istio/common/mesh.go made real inside the private test
// network namespace: the pods' own IPs on loopback, sidecar-style capture of the client pod's
// outbound TCP to Istio's virtualOutbound (15001), and test-made SPIFFE certificates under
// Istio's secret names.
import { execFileSync } from "node:child_process";
import { mkdirSync, mkdtempSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { createCa, spiffe, type TestCa } from "../support/certs.js";
import { EnvoyProcess } from "../support/envoy.js";
import { REPO_ROOT } from "../support/paths.js";
import type { Dump } from "./dump.js";
import { translate, type Translation } from "./xds_files.js";

export const CLIENT_IP = "10.244.1.5";
/** Every mesh address of mesh.go a test binds or dials, plus one outside the mesh. */
export const MESH_IPS = ["10.244.1.5", "10.244.1.17", "10.244.2.9", "10.244.3.4", "10.244.1.30", "10.244.1.21", "10.250.0.1", "10.250.0.2"];

function requireTestNamespace(): void {
  if (process.env.MESH_TEST_NETNS !== "1") {
    throw new Error("tests/istio: real-Envoy tests run inside the test network namespace: bash scripts/in-netns.sh ... (npm run test:istio)");
  }
}

const run = (cmd: string, args: string[]): void => {
  execFileSync(cmd, args, { stdio: ["ignore", "ignore", "pipe"] });
};

/**
 * Puts the mesh's pod IPs (and `extraIps`) on loopback (idempotent) and captures the client pod's
 * outbound TCP.
 */
export function meshNetwork(extraIps: string[] = []): { release(): void } {
  requireTestNamespace();
  for (const ip of [...MESH_IPS, ...extraIps]) {
    try {
      run("ip", ["addr", "add", `${ip}/32`, "dev", "lo"]);
    } catch {
      // already there from an earlier suite in this namespace
    }
  }
  // As istio-iptables does for the app's traffic: everything it dials goes to 15001. Only the
  // client pod's source address is redirected, so Envoy's own upstream connections are not.
  run("iptables", ["-w", "-t", "nat", "-A", "OUTPUT", "-p", "tcp", "-s", CLIENT_IP, "-j", "REDIRECT", "--to-ports", "15001"]);
  return { release: () => run("iptables", ["-w", "-t", "nat", "-F", "OUTPUT"]) };
}

export interface MeshCerts {
  dir: string;
  ca: TestCa;
}

/** The mesh CA and one certificate per service account of mesh.go. */
export async function meshCerts(): Promise<MeshCerts> {
  mkdirSync(join(REPO_ROOT, ".tmp"), { recursive: true });
  const dir = mkdtempSync(join(REPO_ROOT, ".tmp", "istio-certs-"));
  const ca = await createCa(dir, "ca");
  for (const [ns, sa] of [["default", "sleep"], ["default", "httpbin"], ["data", "postgres"], ["default", "my-service"], ["default", "imposter"], ["mesh-feed", "mesh-feed"]]) {
    await ca.issue(sa, [spiffe(ns, sa)]);
  }
  return { dir, ca };
}

export interface SidecarOptions {
  ecds: "ecdsAgent" | "ecdsAgentFetchFailed" | "ecds";
  name: string;
  readyTimeoutMs?: number;
  nodeIp?: string;
  pod?: string;
  /** The bootstrap node's metadata (pilot-agent's part), e.g. `{ NETWORK: "net1" }`. */
  nodeMetadata?: Record<string, string>;
  /** The pod's namespace (default `default`). */
  namespace?: string;
  /** Envoy's admin port (default 15000; a second sidecar in the namespace needs another). */
  adminPort?: number;
  /** Which of istiod's listeners to run (default all; see xds_files.ts). */
  keepListener?: (name: string) => boolean;
}

/** The dump as xDS files for one sidecar, in a new directory under .tmp. */
export function translateFor(d: Dump, certs: MeshCerts, serviceAccount: string, options: SidecarOptions): Translation {
  const xdsDir = mkdtempSync(join(REPO_ROOT, ".tmp", `istio-xds-${options.name}-`));
  return translate(d, xdsDir, {
    certChain: readFileSync(join(certs.dir, `${serviceAccount}.crt`), "utf8"),
    key: readFileSync(join(certs.dir, `${serviceAccount}.key`), "utf8"),
    rootCa: certs.ca.cert,
  }, {
    ecds: options.ecds,
    adminPort: options.adminPort ?? 15000,
    wasmDir: join(REPO_ROOT, "build"),
    nodeId: `sidecar~${options.nodeIp ?? CLIENT_IP}~${options.pod ?? "sleep-0"}.${options.namespace ?? "default"}~${options.namespace ?? "default"}.svc.cluster.local`,
    nodeMetadata: options.nodeMetadata,
    keepListener: options.keepListener,
  });
}

export interface IstioSidecar {
  envoy: EnvoyProcess;
  translation: Translation;
}

/** Starts Envoy on the translated dump; `ecds` picks which ECDS set it gets. */
export async function startSidecar(
  d: Dump,
  certs: MeshCerts,
  serviceAccount: string,
  options: SidecarOptions,
): Promise<IstioSidecar> {
  const translation = translateFor(d, certs, serviceAccount, options);
  const envoy = await EnvoyProcess.start({
    name: options.name,
    adminPort: options.adminPort ?? 15000,
    config: translation.bootstrap,
    readyTimeoutMs: options.readyTimeoutMs ?? 30_000,
  });
  // /ready says LIVE even when Envoy refused istiod's listeners or clusters: require both
  // updates accepted, none rejected.
  const stats = await envoy.waitForStats((s) => (s.get("listener_manager.lds.update_success") ?? 0) >= 1 && (s.get("cluster_manager.cds.update_success") ?? 0) >= 1, 10_000);
  const refused = ["listener_manager.lds.update_rejected", "cluster_manager.cds.update_rejected"].filter((n) => (stats.get(n) ?? 0) > 0);
  if (refused.length > 0 || (stats.get("listener_manager.lds.update_success") ?? 0) < 1) {
    const log = envoy.log().split("\n").filter((l) => /rejected|error/.test(l)).slice(0, 5).join("\n");
    await envoy.stop();
    throw new Error(`Envoy refused istiod's config (${refused.join(", ") || "no LDS update"}):\n${log}`);
  }
  return { envoy, translation };
}

/**
 * Closes test servers, waiting at most `ms` for each: a TLS pod that got plain bytes (a refused
 * connection) keeps its half-made handshake open and would hold server.close() forever.
 */
export async function closeWithin(servers: { close(): Promise<void> }[], ms = 2000): Promise<void> {
  await Promise.all(servers.map((s) => Promise.race([s.close(), new Promise<void>((done) => setTimeout(done, ms))])));
}
