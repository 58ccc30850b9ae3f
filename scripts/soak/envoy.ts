// Envoy soak: 100,000 connections through the real Envoy for each filter's mesh topology (the
// shipped configs, sidecar-style capture), small random payloads both ways checked by SHA-256,
// high concurrency, the application's FIN after the client's (request/response order; the other
// order meets Envoy's known HBONE truncation, tests/support/known_loss.ts, which the
// nothing-lost tests cover). Samples the filter Envoy's memory (/stats server.memory_allocated and
// server.memory_heap_size, and the process RSS) after a warm-up and at the end, prints one JSON
// line per filter and returns false if a connection failed or memory grew beyond the tolerance.
//
// Needs the private network namespace (capture rules): bash scripts/in-netns.sh node --import tsx scripts/soak/envoy.ts
// SOAK_CONNECTIONS overrides the number of connections per filter (default 100000).
import { readFileSync } from "node:fs";
import { pathToFileURL } from "node:url";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../../tests/support/capture.js";
import { describeFailures, runLoad, type Target } from "../../tests/support/checksum_load.js";
import { PayloadPool, startChecksumServer, type ChecksumServer } from "../../tests/support/checksum_server.js";
import { EnvoyProcess } from "../../tests/support/envoy.js";
import { shippedConfig } from "../../tests/support/envoy_yaml.js";
import { LOCAL_BACKEND, REMOTE_BACKEND, WAYPOINT_VIP, WaypointMesh } from "../../tests/support/waypoint_mesh.js";
import { CERT_DIR, writeDemoCerts } from "../demo-certs.js";
import { serverForPod } from "../demo/tunnel_port.js";

const CONNECTIONS = Number(process.env.SOAK_CONNECTIONS ?? 100_000);
const WARM_UP = Math.min(5_000, Math.floor(CONNECTIONS / 10));
const CONCURRENCY = 100;
const MAX_PAYLOAD = 1024;
/**
 * Allowed growth of server.memory_allocated between the warm-up sample and the end. Envoy's own
 * allocations move by a few hundred KiB (stats, pools, buffers); a per-connection leak of even
 * 40 bytes over 95,000 connections would exceed this.
 */
const TOLERANCE_BYTES = 4 * 1024 * 1024;

interface Topology {
  /** The Envoy running the filter whose memory is watched. */
  envoy: EnvoyProcess;
  servers: ChecksumServer[];
  target: (index: number) => Target;
  stop(): Promise<void>;
}

async function passthroughMtls(pool: PayloadPool): Promise<Topology> {
  const servers = [
    await startChecksumServer("httpbin-0", "127.0.0.11", 8443, pool, { certDir: CERT_DIR, certName: "pod-a" }),
    await startChecksumServer("legacy-0", "127.0.0.12", 8080, pool),
    await startChecksumServer("outside", "127.0.0.30", 9000, pool),
  ];
  const envoy = await EnvoyProcess.start({ name: "soak-passthrough-mtls", adminPort: 15000, config: shippedConfig("passthrough_mtls.yaml") });
  captureOutbound(15001);
  return {
    envoy,
    servers,
    target: (index) => servers[index % servers.length]!,
    stop: async () => {
      releaseCapture();
      await envoy.stop();
      for (const server of servers) await server.close();
    },
  };
}

async function tunnelPort(pool: PayloadPool): Promise<Topology> {
  const servers = [await startChecksumServer("app-p1", "127.0.0.21", 9376, pool), await startChecksumServer("app-p2", "127.0.0.22", 9377, pool)];
  const serverConfig = shippedConfig("tunnel_port_server.yaml");
  const sidecars = [
    await EnvoyProcess.start({ name: "soak-tunnel-p1", adminPort: 15000, adminAddress: "127.0.0.21", config: serverConfig }),
    await EnvoyProcess.start({ name: "soak-tunnel-p2", adminPort: 15000, adminAddress: "127.0.0.22", config: serverForPod(serverConfig, "127.0.0.22") }),
  ];
  const envoy = await EnvoyProcess.start({ name: "soak-tunnel-client", adminPort: 15000, config: shippedConfig("tunnel_port_client.yaml") });
  captureOutbound(15001);
  return {
    envoy,
    servers,
    target: () => ({ host: "127.10.0.1", port: 80 }),
    stop: async () => {
      releaseCapture();
      for (const sidecar of [envoy, ...sidecars]) await sidecar.stop();
      for (const server of servers) await server.close();
    },
  };
}

async function waypointRoute(pool: PayloadPool): Promise<Topology> {
  const servers = [
    await startChecksumServer("backend-net1", LOCAL_BACKEND.host, LOCAL_BACKEND.port, pool),
    await startChecksumServer("backend-net2", REMOTE_BACKEND.host, REMOTE_BACKEND.port, pool),
  ];
  const mesh = new WaypointMesh();
  await mesh.start();
  return {
    envoy: mesh.client,
    servers,
    target: () => WAYPOINT_VIP,
    stop: async () => {
      await mesh.stop();
      for (const server of servers) await server.close();
    },
  };
}

interface MemorySample {
  allocated: number;
  heap: number;
  rssMb: number;
}

async function sampleMemory(envoy: EnvoyProcess): Promise<MemorySample> {
  // Let Envoy finish its deferred deletes of the connections that just closed.
  await new Promise((done) => setTimeout(done, 1000));
  const stats = await envoy.stats();
  const status = readFileSync(`/proc/${envoy.child.pid}/status`, "utf8");
  const rssKb = Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? 0);
  return { allocated: stats.get("server.memory_allocated") ?? 0, heap: stats.get("server.memory_heap_size") ?? 0, rssMb: Number((rssKb / 1024).toFixed(1)) };
}

async function soakOne(filter: string, start: (pool: PayloadPool) => Promise<Topology>): Promise<boolean> {
  const seed = (Math.random() * 2 ** 32) >>> 0;
  const pool = new PayloadPool(MAX_PAYLOAD, seed);
  const topology = await start(pool);
  const started = Date.now();
  try {
    const load = (count: number, firstId: number) =>
      runLoad({ count, concurrency: CONCURRENCY, seed: seed + firstId, maxPayload: MAX_PAYLOAD, pool, target: topology.target, servers: topology.servers, localAddress: CLIENT_ADDRESS, firstId, serverFin: "after-client-eof" });
    const warm = await load(WARM_UP, 0);
    const afterWarmUp = await sampleMemory(topology.envoy);
    const rest = await load(CONNECTIONS - WARM_UP, WARM_UP);
    const end = await sampleMemory(topology.envoy);
    const failures = warm.failures.length + rest.failures.length;
    const growth = end.allocated - afterWarmUp.allocated;
    console.log(
      JSON.stringify({
        figure: "soak_envoy",
        filter,
        connections: CONNECTIONS,
        memory_allocated_after_warmup: afterWarmUp.allocated,
        memory_allocated_end: end.allocated,
        growth_bytes: growth,
        heap_size_after_warmup: afterWarmUp.heap,
        heap_size_end: end.heap,
        rss_mb_after_warmup: afterWarmUp.rssMb,
        rss_mb_end: end.rssMb,
        tolerance_bytes: TOLERANCE_BYTES,
        seconds: Math.round((Date.now() - started) / 1000),
        failures,
      }),
    );
    if (failures > 0) console.error(`${filter}: ${describeFailures(warm.failures.length ? warm : rest)}`);
    return failures === 0 && growth <= TOLERANCE_BYTES;
  } finally {
    await topology.stop();
  }
}

export async function envoySoak(): Promise<boolean> {
  await writeDemoCerts();
  let ok = true;
  for (const [filter, start] of [["passthrough_mtls", passthroughMtls], ["tunnel_port", tunnelPort], ["waypoint_route", waypointRoute]] as const) {
    ok = (await soakOne(filter, start)) && ok;
  }
  return ok;
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  envoySoak().then(
    (ok) => process.exit(ok ? 0 : 1),
    (error) => {
      console.error(error);
      process.exit(1);
    },
  );
}
