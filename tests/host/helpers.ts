// Shared test helpers: builds the compiled fixtures when missing or older than their sources,
// and starts a host on the probe filter.
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ProxyWasmHost, type HostOptions } from "../../host/index.js";

export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), "../..");

function newestSource(dirs: string[]): number {
  let newest = 0;
  for (const dir of dirs) {
    for (const entry of readdirSync(dir, { withFileTypes: true, recursive: true })) {
      if (entry.isFile() && entry.name.endsWith(".ts")) {
        newest = Math.max(newest, statSync(join(entry.parentPath, entry.name)).mtimeMs);
      }
    }
  }
  return newest;
}

const sleep = (ms: number) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);

/** Where scripts/build.mjs writes `name`: filters in build/, test fixtures in build/fixtures/. */
function artifact(name: string): { wasm: string; sources: string[] } {
  const fixture = existsSync(join(REPO, "tests/fixtures", name));
  const own = join(REPO, fixture ? "tests/fixtures" : "filters", name);
  const shared = ["assembly/runtime", "assembly/mesh", "assembly/json"].map((dir) => join(REPO, dir));
  return { wasm: join(REPO, fixture ? "build/fixtures" : "build", `${name}.wasm`), sources: [own, ...shared] };
}

/**
 * The compiled `name` (a filter or a test fixture), built with scripts/build.mjs when missing or
 * older than its sources or the shared libraries. Test files run in parallel processes, so a
 * lock directory serialises the builds. `<NAME>_WASM` (e.g. TUNNEL_PORT_WASM) runs the tests on
 * another build instead, such as a deliberately broken one to check the tests can fail.
 */
export function ensureBuilt(name: string): string {
  const override = process.env[`${name.toUpperCase()}_WASM`];
  if (override) return override;
  const { wasm, sources } = artifact(name);
  const stale = () => !existsSync(wasm) || statSync(wasm).mtimeMs < newestSource(sources);
  if (!stale()) return wasm;
  mkdirSync(join(REPO, "build"), { recursive: true });
  const lock = join(REPO, "build/.host-tests-build.lock");
  const deadline = Date.now() + 120_000;
  for (;;) {
    try {
      mkdirSync(lock);
      break;
    } catch {
      if (Date.now() > deadline) throw new Error(`timed out waiting for ${lock}; remove it if stale`);
      sleep(200);
    }
  }
  try {
    if (stale()) execFileSync(process.execPath, ["scripts/build.mjs", name], { cwd: REPO, stdio: "inherit" });
  } finally {
    rmdirSync(lock);
  }
  return wasm;
}

/** A started host on the probe filter (root_id "probe"). */
export async function probe(options: HostOptions = {}): Promise<ProxyWasmHost> {
  const host = await ProxyWasmHost.fromFile(ensureBuilt("host_probe"), { rootId: "probe", ...options });
  if (!host.start()) throw new Error(`probe did not start: ${host.startFailure}`);
  return host;
}

export const text = (bytes: Uint8Array): string => new TextDecoder().decode(bytes);

/** Hex of little-endian int64 `n`, as the probe logs property values. */
export const int64Hex = (n: number | bigint): string => {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigInt64(0, BigInt(n), true);
  return Buffer.from(out).toString("hex");
};

export const hex = (value: string | Uint8Array): string =>
  Buffer.from(typeof value === "string" ? new TextEncoder().encode(value) : value).toString("hex");

/** Log lines of the main VM that start with `prefix`. */
export function linesStarting(host: ProxyWasmHost, prefix: string): string[] {
  return host.logLines().filter((line) => line.startsWith(prefix));
}
