// The mesh model alone in a VM (assembly/mesh/bench/entry.ts, release flags), for the update
// path's tests (tests/host/mesh_delta*.test.ts) and benchmark (bench/scale/mesh_update.ts):
// apply feed messages, configure from JSON, read the model back as a canonical digest.
import { spawnSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync } from "node:fs";
import { join } from "node:path";

const ENTRY = "assembly/mesh/bench/entry.ts";
const OUT = "build/bench/mesh_bench.wasm";

function newest(dir: string): number {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}

/** Compiles the module when missing or older than the AssemblyScript sources. */
export function buildMeshModule(): string {
  const sources = Math.max(newest("assembly/mesh"), newest("assembly/json"), newest("assembly/runtime"));
  if (existsSync(OUT) && statSync(OUT).mtimeMs >= sources) return OUT;
  mkdirSync("build/bench", { recursive: true });
  const built = spawnSync(
    process.execPath,
    ["node_modules/assemblyscript/bin/asc.js", ENTRY, "--config", "assembly/mesh/bench/asconfig.json", "--outFile", OUT],
    { stdio: "inherit" },
  );
  if (built.status !== 0) throw new Error(`asc failed to build ${ENTRY}`);
  return OUT;
}

type Exports = Record<string, any> & { memory: WebAssembly.Memory };

export class MeshVm {
  private constructor(private x: Exports) {}

  static async create(): Promise<MeshVm> {
    const wasm = readFileSync(buildMeshModule());
    let x: Exports | null = null;
    const env = {
      abort: () => {
        throw new Error("abort: the mesh module trapped");
      },
      proxy_get_buffer_bytes: () => 1, // NOT_FOUND: these tests hand buffers in directly
    };
    x = (await WebAssembly.instantiate(wasm, { env })).instance.exports as Exports;
    return new MeshVm(x);
  }

  private copyIn(bytes: Uint8Array): number {
    const ptr = this.x.__pin(this.x.newBuffer(bytes.length)) >>> 0;
    new Uint8Array(this.x.memory.buffer, ptr, bytes.length).set(bytes);
    return ptr;
  }

  private readBuffer(ptr: number): Uint8Array {
    const p = ptr >>> 0;
    const size = new DataView(this.x.memory.buffer).getUint32(p - 4, true);
    return new Uint8Array(this.x.memory.buffer, p, size).slice();
  }

  /** Applies one feed message: "" when applied, else the one-line refusal. */
  apply(bytes: Uint8Array): string {
    const ptr = this.copyIn(bytes);
    try {
      const ok = this.x.applyMessage(ptr) === 1;
      const error = Buffer.from(this.readBuffer(this.x.lastErrorUtf8())).toString("utf8");
      if (ok && error !== "") throw new Error(`applied but with an error: ${error}`);
      if (!ok && error === "") throw new Error("refused without an error line");
      return error;
    } finally {
      this.x.__unpin(ptr);
    }
  }

  /** Configures from a JSON snapshot (the operator's form); true when accepted. */
  configureJson(text: string): boolean {
    const ptr = this.copyIn(Buffer.from(text, "utf8"));
    try {
      return this.x.configure(ptr) === 1;
    } finally {
      this.x.__unpin(ptr);
    }
  }

  reset(): void {
    this.x.resetMesh();
  }

  digest(): string {
    return Buffer.from(this.readBuffer(this.x.digestUtf8())).toString("utf8");
  }

  version(): number {
    return this.x.meshVersion();
  }

  memoryBytes(): number {
    return this.x.memoryBytes();
  }

  retainedBytes(): number {
    return this.x.retainedBytes();
  }

  collect(): void {
    this.x.collect();
  }

  /** Removed services whose VIPs and SANs a later delta has still to release. */
  retiredServices(): number {
    return this.x.retiredServiceCount();
  }

  workloadByV4(network: number, ip: number): number {
    return this.x.workloadByV4(network, ip >>> 0);
  }

  /** The service a hostname names, or -1. */
  serviceByHostname(hostname: string): number {
    const ptr = this.copyIn(Buffer.from(hostname, "utf8"));
    try {
      return this.x.serviceByHostnameUtf8(ptr);
    } finally {
      this.x.__unpin(ptr);
    }
  }

  /** The service holding IPv4 VIP `ip` (dotted) on the network named `network`, or -1. */
  serviceByVip4(network: string, ip: string): number {
    const key = ip.split(".").reduce((k, part) => k * 256 + Number(part), 0);
    const ptr = this.copyIn(Buffer.from(network, "utf8"));
    try {
      return this.x.serviceByVip4(ptr, key >>> 0);
    } finally {
      this.x.__unpin(ptr);
    }
  }

  live(): { workloads: number; services: number; memberships: number } {
    const p = this.x.liveCounts() >>> 0;
    const view = new DataView(this.x.memory.buffer);
    const data = view.getUint32(p + 4, true); // Int32Array: buffer, dataStart, byteLength
    return {
      workloads: view.getInt32(data, true),
      services: view.getInt32(data + 4, true),
      memberships: view.getInt32(data + 8, true),
    };
  }

  /** Service s's port count (-1 when s is not live), and the target of one of its ports (-1: none). */
  servicePorts(s: number): number {
    return this.x.servicePorts(s);
  }

  serviceTargetPort(s: number, port: number): number {
    return this.x.serviceTargetPort(s, port);
  }

  /** Per-connection lookups of pseudo-random pods 10.x.y.z; returns hits. */
  lookups(iterations: number, pods: number): number {
    return this.x.lookups(iterations, pods);
  }
}
