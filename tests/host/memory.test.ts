// Linear memory never shrinks, and AssemblyScript's allocator grows it by at least its current
// size when a block does not fit (assembly/mesh/README.md). So two promises matter more than any
// per-pod figure: the build's up-front reservation covers everything the build allocates (else
// memory doubles at configure), and nothing a filter does per connection afterwards grows it
// (else a burst of refused connections doubles it). Both are exact byte counts, not timings.
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import { before, describe, it } from "node:test";
import { buildSnapshot } from "../../bench/lib/mesh_snapshot.js";
import { drawConnections, SUBJECTS } from "../../bench/scale/subjects.js";
import { configureVm } from "../../bench/scale/vm.js";

const MESH_MODULE = "build/bench/mesh_bench.wasm";
/** What linear memory holds besides the reservation: runtime, stack, the reader's windows. */
const FIXED_BYTES = 512 * 1024;

interface MeshModule {
  memory: WebAssembly.Memory;
  malloc(size: number): number;
  configureWindowed(size: number, window: number): number;
  reservedBytes(): number;
}

/** The mesh model's benchmark module, reading `config` through proxy_get_buffer_bytes as Envoy serves it. */
async function meshModule(wasm: Uint8Array, config: Uint8Array): Promise<MeshModule> {
  let x: MeshModule | undefined;
  const env = {
    abort: () => {
      throw new Error("abort");
    },
    seed: () => 1,
    trace: () => {},
    proxy_get_buffer_bytes: (_type: number, start: number, length: number, ptrOut: number, sizeOut: number) => {
      const from = Math.min(start >>> 0, config.length);
      const to = Math.min(from + (length >>> 0), config.length);
      const block = x!.malloc(Math.max(to - from, 1)) >>> 0;
      new Uint8Array(x!.memory.buffer).set(config.subarray(from, to), block);
      const words = new DataView(x!.memory.buffer);
      words.setUint32(ptrOut >>> 0, block, true);
      words.setUint32(sizeOut >>> 0, to - from, true);
      return 0;
    },
  };
  const { instance } = await WebAssembly.instantiate(wasm, { env });
  x = instance.exports as unknown as MeshModule;
  return x;
}

const ip = (i: number): string => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
const ip6 = (i: number): string => `fd00::${(i >> 16).toString(16)}:${(i & 0xffff).toString(16)}`;

interface Shape {
  readonly pods: number;
  readonly podsPerService: number;
  readonly ports: number;
  readonly sans: number;
  readonly hostnameLength: number;
  readonly cluster?: boolean;
  readonly dualStack?: boolean;
  /** Every `n`th workload has its own waypoint (0: none). */
  readonly waypointEvery?: number;
  /** Every `n`th endpoint overrides every port's target. */
  readonly overrideEvery?: number;
}

/** A mesh of one shape: the texts and counts the reservation estimates, pushed to extremes. */
function meshOf(shape: Shape): Uint8Array {
  const parts: string[] = ['{"workloads":['];
  for (let i = 0; i < shape.pods; i++) {
    const addresses = shape.dualStack ? `"${ip(i)}","${ip6(i)}"` : `"${ip(i)}"`;
    const waypoint = shape.waypointEvery && i % shape.waypointEvery === 0 ? `,"waypoint":{"hostname":"wp-${i % 97}.ns.svc"}` : "";
    parts.push(
      `${i ? "," : ""}{"uid":"pod-${i}","addresses":[${addresses}],"tlsMode":"istio",` +
        `"identity":"spiffe://td/ns/n/sa/s${i % 13}","locality":"r/z${i % 3}"${waypoint}}`,
    );
  }
  parts.push('],"services":[');
  const services = Math.ceil(shape.pods / shape.podsPerService);
  for (let s = 0; s < services; s++) {
    const hostname = `svc-${s}-${"x".repeat(shape.hostnameLength)}.ns.svc.cluster.local`;
    const ports = Object.fromEntries(Array.from({ length: shape.ports }, (_, k) => [String(80 + k), 8080 + k]));
    const endpoints: string[] = [];
    for (let i = s * shape.podsPerService; i < Math.min(shape.pods, (s + 1) * shape.podsPerService); i++) {
      const override = shape.overrideEvery && i % shape.overrideEvery === 0
        ? `,"ports":${JSON.stringify(Object.fromEntries(Object.keys(ports).map((p) => [p, 9000])))}`
        : "";
      endpoints.push(`{"workload":"pod-${i}"${override}}`);
    }
    const sans = Array.from({ length: shape.sans }, (_, k) => `"spiffe://td/ns/n/sa/a${k}"`);
    parts.push(
      `${s ? "," : ""}{"hostname":"${hostname}","vips":[{"address":"172.${(s >> 16) & 255}.${(s >> 8) & 255}.${s & 255}"}],` +
        `"ports":${JSON.stringify(ports)},"endpoints":[${endpoints.join(",")}],"subjectAltNames":[${sans.join(",")}]` +
        `${shape.cluster ? `,"cluster":"c-${hostname}"` : ""}}`,
    );
  }
  parts.push("]}");
  return Buffer.from(parts.join(""));
}

const SHAPES: Readonly<Record<string, Shape>> = {
  "one pod per service, 3 ports, 3 SANs": { pods: 40_000, podsPerService: 1, ports: 3, sans: 3, hostnameLength: 10 },
  "one pod per service, 100-character hostnames, explicit clusters": { pods: 40_000, podsPerService: 1, ports: 1, sans: 0, hostnameLength: 100, cluster: true },
  "5 pods per service, 8 ports": { pods: 40_000, podsPerService: 5, ports: 8, sans: 0, hostnameLength: 20 },
  "2 pods per service, 10 SANs": { pods: 40_000, podsPerService: 2, ports: 1, sans: 10, hostnameLength: 5 },
  "dual-stack pods, a waypoint on every workload, every endpoint overriding its ports": {
    pods: 40_000, podsPerService: 50, ports: 2, sans: 0, hostnameLength: 10, dualStack: true, waypointEvery: 1, overrideEvery: 1,
  },
  "a waypoint on every 10th workload (sparse column)": { pods: 40_000, podsPerService: 50, ports: 1, sans: 0, hostnameLength: 10, waypointEvery: 10, overrideEvery: 10 },
};

describe("VM memory", () => {
  let wasm: Uint8Array;
  before(() => {
    mkdirSync("build/bench", { recursive: true });
    const built = spawnSync(
      process.execPath,
      ["node_modules/assemblyscript/bin/asc.js", "assembly/mesh/bench/entry.ts", "--config", "assembly/mesh/bench/asconfig.json", "--outFile", MESH_MODULE],
      { stdio: "inherit" },
    );
    assert.equal(built.status, 0, "the mesh benchmark module compiles");
    wasm = readFileSync(MESH_MODULE);
  });

  const cases: Array<[string, () => Uint8Array]> = [
    ...Object.entries(SHAPES).map(([name, shape]): [string, () => Uint8Array] => [name, () => meshOf(shape)]),
    ["the benchmark's cluster-like snapshot (100k pods)", () => buildSnapshot(100_000).config],
  ];
  for (const [name, make] of cases) {
    it(`the build's reservation covers what it allocates: ${name}`, async () => {
      const config = make();
      const x = await meshModule(wasm, config);
      assert.equal(x.configureWindowed(config.length, 0), 1, "configures");
      const reserved = x.reservedBytes();
      assert.ok(reserved > 0, "reserved up front");
      const linear = x.memory.buffer.byteLength;
      // Over-running the reservation grows memory by its whole size: ~2x, far past this bound.
      assert.ok(linear <= reserved + FIXED_BYTES, `linear memory ${linear} B vs reserved ${reserved} B + ${FIXED_BYTES} B fixed`);
    });
  }

  it("stays the same through 2,000 refused connections, each logging a warning (tunnel_port server, 10k pods)", () => {
    const subject = SUBJECTS.find((s) => s.name === "tunnel_port_server")!;
    const snapshot = buildSnapshot(10_000, subject.own);
    const { vm, error } = configureVm(new Uint8Array(readFileSync(subject.wasm)), subject, snapshot);
    assert.ok(vm, error);
    const route = subject.routes.find((r) => r.name === "unserved_port");
    assert.ok(route, "the subject has a refusal route");
    const host = vm.host;
    const connections = drawConnections(subject, snapshot, 2_000, route, 11);
    host.connect(connections[0]!).end();
    const settled = host.guestMemoryBytes;
    for (const options of connections.slice(1)) host.connect(options).end();
    assert.equal(host.logLines("warn").length, 2_000, "every refusal logged a warning");
    assert.equal(host.guestMemoryBytes, settled, "linear memory did not grow");
  });
});
