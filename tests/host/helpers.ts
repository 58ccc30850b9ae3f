// Shared test helpers: builds the compiled fixtures when missing or older than their sources,
// starts a host on the probe filter or on a filter with a configuration, and reads what a
// connection got (filter-state writes, log lines, counters, how it ended).
import { execFileSync } from "node:child_process";
import { existsSync, mkdirSync, readdirSync, rmdirSync, statSync } from "node:fs";
import { dirname, join, resolve } from "node:path";
import { setTimeout as pause } from "node:timers/promises";
import { fileURLToPath } from "node:url";
import assert from "node:assert/strict";
import {
  Connection,
  ProxyWasmHost,
  WasmResult,
  type ConnectOptions,
  type HostLogLevel,
  type HostOptions,
} from "../../host/index.js";

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

// ---------------------------------------------------------------- a filter with a configuration

/** Envoy filter-state keys the mesh filters write. */
export const SAN = "envoy.network.upstream_subject_alt_names";
export const ORIGINAL_DST = "envoy.network.transport_socket.original_dst_address";
export const CLUSTER = "envoy.tcp_proxy.cluster";
export const DISABLE_TUNNELING = "envoy.tcp_proxy.disable_tunneling";

/** A plugin configuration as the host takes it: a string as is, anything else as JSON. */
export const configurationText = (config: unknown): string => (typeof config === "string" ? config : JSON.stringify(config));

/** A started host on filter `name` (root_id `name`) configured with `config`; fails the test if it does not start. */
export async function startFilter(name: string, config: unknown, options: HostOptions = {}): Promise<ProxyWasmHost> {
  const host = await ProxyWasmHost.fromFile(ensureBuilt(name), {
    rootId: name,
    pluginConfiguration: configurationText(config),
    ...options,
  });
  assert.ok(host.start(), host.startFailure ?? "");
  return host;
}

/** One connection on a fresh host of filter `name` (see startFilter). */
export async function connectOnce(
  name: string,
  config: unknown,
  connect: ConnectOptions,
  options: HostOptions = {},
): Promise<{ host: ProxyWasmHost; conn: Connection }> {
  const host = await startFilter(name, config, options);
  return { host, conn: host.connect(connect) };
}

/**
 * Asserts that filter `name` refuses `config` with exactly one error line
 * `invalid plugin configuration: <message>` and without trapping: first as Envoy does it (the
 * canary VM checks the configuration and the refusal stops there), then in the main VM alone.
 */
export async function assertConfigRefused(name: string, config: unknown, message: string): Promise<void> {
  const pluginConfiguration = configurationText(config);
  const host = await ProxyWasmHost.fromFile(ensureBuilt(name), { rootId: name, pluginConfiguration });
  assert.equal(host.start(), false);
  assert.match(host.startFailure ?? "", /proxy_on_configure returned false/);
  assert.equal(host.failed, false, host.trapMessage ?? "");
  assert.deepEqual(errorLines(host), [`invalid plugin configuration: ${message}`]);
  // The same in the main VM (no canary): one line, refused, no trap.
  const direct = await ProxyWasmHost.fromFile(ensureBuilt(name), { rootId: name, pluginConfiguration, canary: false });
  assert.equal(direct.start(), false);
  assert.equal(direct.failed, false, direct.trapMessage ?? "");
  assert.deepEqual(direct.logLines("error"), [`invalid plugin configuration: ${message}`]);
  assert.deepEqual(direct.logLines("critical"), []);
}

/**
 * An assertion on every counter `<prefix>.<name>` of a filter: the ones not named in `expected`
 * must be 0. E.g. `const assertCounters = counterAssertion("tunnel_port", COUNTERS)`.
 */
export function counterAssertion<const N extends string>(
  prefix: string,
  names: readonly N[],
): (host: ProxyWasmHost, expected: Partial<Record<N, number>>) => void {
  return (host, expected) => {
    const metrics = host.metrics();
    const actual = Object.fromEntries(names.map((name) => [name, metrics.get(`${prefix}.${name}`) ?? 0]));
    const wanted = Object.fromEntries(names.map((name) => [name, expected[name] ?? 0]));
    assert.deepEqual(actual, wanted);
  };
}

// ---------------------------------------------------------------- what a connection got

/** Every write the filter made (filter state and properties, not pre-existing state), in order, as [key, value]. */
export function writes(conn: Connection): [string, string][] {
  return conn.filterStateWrites.filter((w) => w.source !== "existing").map((w) => [w.key, w.value]);
}

/** set_envoy_filter_state writes in order, as [key, value]. */
export function envoyWrites(conn: Connection): [string, string][] {
  return conn.filterStateWrites.filter((w) => w.source === "set_envoy_filter_state").map((w) => [w.key, w.value]);
}

/** set_property writes, as Envoy stores them (filter state `wasm.<name>`) → value. */
export function wasmProperties(conn: Connection): Record<string, string> {
  return Object.fromEntries(conn.filterStateWrites.filter((w) => w.source === "set_property").map((w) => [w.key, w.value]));
}

/** Every write in call order, both kinds: [source, key, value]. */
export function allWrites(conn: Connection): [string, string, string][] {
  return conn.filterStateWrites.map((w) => [w.source, w.key, w.value]);
}

/** Main-VM log lines of one connection's context, of `level` if given. */
export function linesOf(host: ProxyWasmHost, conn: Connection, level?: HostLogLevel): string[] {
  return host
    .logs()
    .filter((e) => e.vm === "main" && e.contextId === conn.id && (level === undefined || e.level === level))
    .map((e) => e.message);
}

/** Every error and critical line of the host (all VMs, canary included). */
export function errorLines(host: ProxyWasmHost): string[] {
  return host
    .logs()
    .filter((e) => e.level === "error" || e.level === "critical")
    .map((e) => e.message);
}

/** The connection goes on: Continue, not closed, the VM did not trap. */
export function assertContinues(host: ProxyWasmHost, conn: Connection): void {
  assert.equal(conn.status, "Continue");
  assert.equal(conn.closed, false);
  assert.equal(host.failed, false, host.trapMessage ?? "");
}

/** The filter closed the connection itself (StopIteration, close reason "filter"), without trapping. */
export function assertClosedByFilter(host: ProxyWasmHost, conn: Connection): void {
  assert.equal(conn.status, "StopIteration");
  assert.equal(conn.closed, true);
  assert.equal(conn.closeReason, "filter");
  assert.equal(host.failed, false, host.trapMessage ?? "");
}

/**
 * Envoy refusing a write: the filter only writes well-formed values to registered keys, so a
 * refusal cannot be provoked through inputs. This replaces the host's answer to one filter-state
 * key or property for the duration of `run` with `status` (default NOT_FOUND, what an older Envoy
 * without the key's factory answers; a refused value is BAD_ARGUMENT).
 */
export function withRefusal<T>(refuse: { filterStateKey?: string; property?: string; status?: number }, run: () => T): T {
  const proto = Connection.prototype;
  const setEnvoyFilterState = proto.setEnvoyFilterState;
  const setProperty = proto.setProperty;
  const status = refuse.status ?? WasmResult.NotFound;
  proto.setEnvoyFilterState = function (this: Connection, key: string, value: string, span: number) {
    return key === refuse.filterStateKey ? status : setEnvoyFilterState.call(this, key, value, span);
  };
  proto.setProperty = function (this: Connection, path: string, value: Uint8Array) {
    return path === refuse.property ? status : setProperty.call(this, path, value);
  };
  try {
    return run();
  } finally {
    proto.setEnvoyFilterState = setEnvoyFilterState;
    proto.setProperty = setProperty;
  }
}

/** Waits (polling every 5 ms) until `condition` holds; fails naming `what` after `timeoutMs`. */
export async function until(what: string, condition: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await pause(5);
  }
}
