// Runs fuzz cases against one filter in the host emulator, reusing VMs across cases:
// - the connection VM is configured once with the valid snapshot and takes every connection
//   case (and the reference connections the differential oracles compare with);
// - the configuration VM (no canary; refused roots are deleted) takes every mutated
//   configuration through reconfigure(), then a few connections when it is accepted.
// After a trap the VM is replaced by a fresh one. Each case returns the first problem an oracle
// found (or undefined); memory is read before and after so growth after warm-up is visible.
import { ProxyWasmHost, type ConnectOptions } from "../../host/index.js";
import type { ConnectionInput, FuzzCase } from "./cases.js";
import { checkAccepted, checkConnection, checkRefusal } from "./oracles.js";
import { splitAddress } from "./properties.js";
import { CONFIG_SNAPSHOT, FUZZ_SNAPSHOT, SERVED_PAIRS, type Target } from "./targets.js";

export const SERVICE_PORT_STATE = "io.tunnel_port.service_port";
export const PEER_STATE = "io.tunnel_port.peer_principal";
export const AUTHORITY_STATE = "io.tunnel_port.authority";

export interface CaseResult {
  readonly problem?: string;
  /** The outcome counter of the case's connection (connection cases). */
  readonly outcome?: string;
  /** Configuration cases: accepted or refused. */
  readonly accepted?: boolean;
  readonly trapped?: boolean;
}

export class FuzzSession {
  readonly baseConfig: Record<string, unknown>;
  readonly baseBytes: Uint8Array;
  /** What configuration cases mutate: the target's configuration for the small snapshot. */
  readonly configBase: Record<string, unknown>;
  private connectionVm!: ProxyWasmHost;
  private configVm!: ProxyWasmHost;
  /** Outcome of a clean connection to a canonical destination (differential oracles). */
  private readonly reference = new Map<string, string>();
  private readonly counterPrefix: string;
  private readonly routes: Set<string>;
  traps = 0;

  constructor(
    readonly target: Target,
    private readonly wasm: Uint8Array,
    /** The valid configuration (default: the target's, for the fuzz snapshot). */
    baseConfig?: Record<string, unknown>,
  ) {
    this.baseConfig = baseConfig ?? target.baseConfig(FUZZ_SNAPSHOT);
    this.baseBytes = new TextEncoder().encode(JSON.stringify(this.baseConfig));
    this.configBase = target.baseConfig(CONFIG_SNAPSHOT);
    this.counterPrefix = `${target.filter}.`;
    this.routes = new Set(Object.keys((this.baseConfig.routes ?? {}) as Record<string, string>));
    this.connectionVm = this.newConnectionVm();
    this.configVm = this.newConfigVm();
  }

  private newConnectionVm(): ProxyWasmHost {
    const host = ProxyWasmHost.fromBytes(this.wasm, { rootId: this.target.filter, pluginConfiguration: this.baseBytes, canary: false });
    if (!host.start()) throw new Error(`${this.target.name}: the valid snapshot is refused: ${host.startFailure} ${host.logLines().join(" | ")}`);
    host.clearLogs();
    return host;
  }

  private newConfigVm(): ProxyWasmHost {
    const host = ProxyWasmHost.fromBytes(this.wasm, {
      rootId: this.target.filter,
      pluginConfiguration: this.baseBytes,
      canary: false,
      deleteRefusedRoots: true,
    });
    if (!host.start()) throw new Error(`${this.target.name}: the valid snapshot is refused: ${host.startFailure}`);
    host.clearLogs();
    return host;
  }

  /** Linear memory of both VMs (bytes). */
  memory(): { connection: number; config: number } {
    return { connection: this.connectionVm.guestMemoryBytes, config: this.configVm.guestMemoryBytes };
  }

  run(c: FuzzCase): CaseResult {
    return c.kind === "config" ? this.runConfig(c.config, c.connections) : this.runConnectionCase(c.connection);
  }

  // ---- configuration cases -----------------------------------------------------------------------

  private runConfig(bytes: Uint8Array, connections: readonly ConnectionInput[]): CaseResult {
    const host = this.configVm;
    host.clearLogs();
    const accepted = host.reconfigure(bytes);
    if (host.failed) return this.trap("config", `configure trapped: ${host.trapMessage}`);
    if (!accepted) {
      const lines = host.logLines();
      host.clearLogs();
      const problem = checkRefusal(lines, bytes);
      return problem ? { problem, accepted } : { accepted };
    }
    const problem = checkAccepted(bytes) ?? (host.logLines("error").length ? `accepted, but logged errors: ${host.logLines("error").slice(0, 2).join(" | ")}` : undefined);
    host.clearLogs();
    if (problem) return { problem, accepted };
    for (const input of connections) {
      const result = this.connect(host, input);
      if (result.problem) return { ...result, problem: `after an accepted configuration: ${result.problem}`, accepted };
    }
    return { accepted };
  }

  // ---- connection cases --------------------------------------------------------------------------

  private runConnectionCase(input: ConnectionInput): CaseResult {
    const result = this.connect(this.connectionVm, input);
    if (result.problem || result.outcome === undefined) return result;
    const problem = this.specific(input, result.outcome, result.written ?? new Map());
    return problem ? { problem, outcome: result.outcome } : result;
  }

  /** One connection through `host` with the generic oracles. */
  private connect(host: ProxyWasmHost, input: ConnectionInput): CaseResult & { written?: Map<string, Uint8Array> } {
    const before = host.metrics();
    host.clearLogs();
    if (input.debug) host.setLogLevel("debug");
    const conn = host.connect(this.connectOptions(input));
    if (input.debug) host.setLogLevel("info");
    if (host.failed) return this.trap(host === this.connectionVm ? "connection" : "config", `on_new_connection trapped: ${host.trapMessage}`);
    const after = host.metrics();
    const deltas = new Map<string, number>();
    for (const [name, value] of after) {
      if (!name.startsWith(this.counterPrefix)) continue;
      const d = value - (before.get(name) ?? 0);
      if (d !== 0) deltas.set(name.slice(this.counterPrefix.length), d);
    }
    const observation = {
      deltas,
      status: conn.status,
      closed: conn.closed,
      closeReason: conn.closeReason,
      lines: host.logLines(),
      debug: input.debug,
    };
    const written = conn.propertyWrites;
    conn.end();
    host.clearLogs();
    if (host.failed) return this.trap(host === this.connectionVm ? "connection" : "config", `connection close trapped: ${host.trapMessage}`);
    const [problem, outcome] = checkConnection(this.target, observation);
    return { ...(problem ? { problem } : {}), ...(outcome ? { outcome } : {}), written };
  }

  private connectOptions(input: ConnectionInput): ConnectOptions {
    const properties: Record<string, unknown> = {};
    if (input.destination.bytes !== undefined) properties.destination = { address: input.destination.bytes };
    if (input.routePort?.bytes !== undefined) {
      properties.metadata = { filter_metadata: { tunnel_port: { service_port: input.routePort.bytes } } };
    }
    const filterState: Record<string, Uint8Array> = {};
    if (input.peer?.bytes !== undefined) filterState[PEER_STATE] = input.peer.bytes;
    if (input.servicePort?.bytes !== undefined) filterState[SERVICE_PORT_STATE] = input.servicePort.bytes;
    if (input.authority?.bytes !== undefined) filterState[AUTHORITY_STATE] = input.authority.bytes;
    return { properties: properties as ConnectOptions["properties"], filterState, mtls: true };
  }

  private trap(vm: "config" | "connection", message: string): CaseResult {
    this.traps++;
    if (vm === "config") this.configVm = this.newConfigVm();
    else this.connectionVm = this.newConnectionVm();
    return { problem: message, trapped: true };
  }

  /** The outcome of a clean connection to `canonical` (run once, then remembered). */
  private referenceOutcome(canonical: string): string | undefined {
    const known = this.reference.get(canonical);
    if (known !== undefined) return known;
    const bytes = new TextEncoder().encode(canonical);
    const result = this.connect(this.connectionVm, { destination: { bytes, validity: "valid", canonical, label: "reference" }, debug: false });
    if (result.problem || result.outcome === undefined) return undefined;
    this.reference.set(canonical, result.outcome);
    return result.outcome;
  }

  // ---- what the README promises for these particular inputs ---------------------------------------

  private specific(input: ConnectionInput, outcome: string, written: ReadonlyMap<string, Uint8Array>): string | undefined {
    const t = this.target;
    const dst = input.destination;
    if (t.server) return this.serverRules(input, outcome, written);
    if (dst.validity === "invalid" && t.name !== "probe" && outcome !== t.noDestination) {
      return `destination ${dst.label} ${show(dst.bytes)} is not usable, expected ${t.noDestination}, got ${outcome}`;
    }
    if (t.name === "probe") {
      if (dst.bytes === undefined && outcome !== "no_destination") return `missing destination: expected no_destination, got ${outcome}`;
      if (dst.validity === "valid") {
        const ip = splitAddress(new TextDecoder().decode(dst.bytes))?.ip;
        const expected = ip !== undefined && this.routes.has(ip) ? "routed" : "defaulted";
        if (outcome !== expected) return `destination ${show(dst.bytes)}: expected ${expected}, got ${outcome}`;
      }
      return undefined;
    }
    if (dst.validity === "valid" && t.name === "passthrough_mtls" && outcome === "no_destination") {
      return `valid destination ${show(dst.bytes)} counted as no_destination`;
    }
    if (dst.validity === "valid" && dst.canonical !== undefined && (dst.label === "respelled" || input.routePort !== undefined)) {
      const reference = this.referenceOutcome(dst.canonical);
      if (reference !== undefined && reference !== outcome) {
        const why = dst.label === "respelled" ? `the same address spelled ${show(dst.bytes)}` : `route metadata ${input.routePort!.label} ${show(input.routePort!.bytes)}`;
        return `${dst.canonical} is ${reference}, but with ${why} it is ${outcome}`;
      }
    }
    return undefined;
  }

  /** tunnel_port server rules 1-5, in order, from the README. */
  private serverRules(input: ConnectionInput, outcome: string, written: ReadonlyMap<string, Uint8Array>): string | undefined {
    const peer = input.peer!;
    const port = input.servicePort!;
    const dst = input.destination;
    const authority = input.authority!;
    const authorityAbsent = authority.bytes === undefined || authority.bytes.length === 0;
    const describe = () =>
      `peer ${peer.label} ${show(peer.bytes)}, service port ${port.label} ${show(port.bytes)}, destination ${dst.label} ${show(dst.bytes)}, authority ${authority.label} ${show(authority.bytes)}`;
    if (peer.validity === "invalid") {
      return outcome === "server.refused_no_peer" ? undefined : `${describe()}: expected refused_no_peer, got ${outcome}`;
    }
    if (peer.validity === "valid" && (port.validity === "invalid" || dst.validity === "invalid")) {
      // No destination or no value at all: missing; a value that is not one canonical port: malformed.
      // The destination is checked first, so an unsure one (random bytes) may be either.
      const absent = port.bytes === undefined || port.bytes.length === 0;
      const expected =
        dst.validity === "invalid" || (port.validity === "invalid" && absent) || authorityAbsent
          ? ["server.refused_missing_port"]
          : dst.validity === "valid"
            ? ["server.refused_malformed_port"]
            : ["server.refused_missing_port", "server.refused_malformed_port"];
      return expected.includes(outcome) ? undefined : `${describe()}: expected ${expected.map((e) => e.slice("server.".length)).join(" or ")}, got ${outcome}`;
    }
    if (peer.validity === "valid" && port.validity === "valid" && dst.validity === "valid" && authority.validity === "invalid") {
      // Presence first, then the spelling: absent → missing, another spelling → malformed_authority.
      const expected = authorityAbsent ? "server.refused_missing_port" : "server.refused_malformed_authority";
      return outcome === expected ? undefined : `${describe()}: expected ${expected.slice("server.".length)}, got ${outcome}`;
    }
    if (outcome === "server.accepted" && (port.validity === "invalid" || dst.validity === "invalid" || authority.validity === "invalid")) {
      return `${describe()}: accepted`;
    }
    if (outcome === "server.accepted" && port.port !== undefined && dst.canonical !== undefined) {
      // what the rest of the chain reads: %FILTER_STATE(wasm.service_port / wasm.target_port:PLAIN)%
      const text = (path: string) => new TextDecoder().decode(written.get(path) ?? new Uint8Array());
      const target = splitAddress(dst.canonical)?.port;
      if (text("service_port") !== String(port.port) || text("target_port") !== String(target)) {
        return `${describe()}: accepted with service_port=${text("service_port")} target_port=${text("target_port")}`;
      }
    }
    if (peer.validity === "valid" && port.validity === "valid" && dst.validity === "valid" && authority.validity === "valid" && port.port !== undefined) {
      const address = splitAddress(dst.canonical ?? "");
      if (address === undefined) return undefined;
      const local = address.ip === FUZZ_SNAPSHOT.localWorkload;
      const servesTarget = [...SERVED_PAIRS].some((p) => p.endsWith(`/${address.port}`));
      const serves = SERVED_PAIRS.has(`${port.port}/${address.port}`);
      const expected = !local
        ? "server.refused_foreign_authority"
        : !servesTarget
          ? "server.refused_unserved_port"
          : !serves
            ? "server.refused_port_mismatch"
            : "server.accepted";
      if (outcome !== expected) return `${describe()}: expected ${expected}, got ${outcome}`;
    }
    return undefined;
  }
}

function show(bytes: Uint8Array | undefined): string {
  if (bytes === undefined) return "(absent)";
  const text = JSON.stringify(new TextDecoder().decode(bytes.subarray(0, 80)));
  return bytes.length > 80 ? `${text}…(${bytes.length} bytes)` : text;
}
