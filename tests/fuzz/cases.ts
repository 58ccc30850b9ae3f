// One fuzz case, generated from a seed: either a mutated plugin configuration (followed by a
// few connections when it is accepted) or one connection with generated per-connection inputs
// against the target's valid configuration. Cases are plain data, saved as JSON (bytes as
// base64) so a failing one can be replayed exactly.
import { mutateConfig } from "./config_mutate.js";
import { destinationValue, peerValue, portValue, type GeneratedValue } from "./properties.js";
import { Rng } from "./rng.js";
import { FUZZ_PORTS, FUZZ_SNAPSHOT, type Target } from "./targets.js";

export interface ConnectionInput {
  readonly destination: GeneratedValue;
  /** tunnel_port server: `io.tunnel_port.peer_principal` */
  readonly peer?: GeneratedValue;
  /** tunnel_port server: `io.tunnel_port.service_port` */
  readonly servicePort?: GeneratedValue & { readonly port?: number };
  /** tunnel_port server: `io.tunnel_port.authority` (the CONNECT's :authority text) */
  readonly authority?: GeneratedValue;
  /** tunnel_port client: `metadata.filter_metadata.tunnel_port.service_port` */
  readonly routePort?: GeneratedValue;
  /** Run at debug level (the decision lines are built): the debug-only code paths run too. */
  readonly debug: boolean;
}

export type FuzzCase =
  | { readonly kind: "config"; readonly config: Uint8Array; readonly note: string; readonly connections: ConnectionInput[] }
  | { readonly kind: "connection"; readonly connection: ConnectionInput };

/** Share of configuration cases (the rest are connection cases on the valid configuration). */
export const CONFIG_SHARE = 0.1;

export function connectionInput(target: Target, rng: Rng): ConnectionInput {
  const known = FUZZ_SNAPSHOT.knownDestinations;
  const debug = rng.chance(0.125);
  if (target.server) {
    // mostly this workload's own address, with ports it does and does not serve
    const destination: GeneratedValue = rng.chance(0.6)
      ? (() => {
          const text = `${FUZZ_SNAPSHOT.localWorkload}:${rng.pick(FUZZ_PORTS)}`;
          return { bytes: new TextEncoder().encode(text), validity: "valid", canonical: text, label: "local workload" };
        })()
      : destinationValue(rng, known, FUZZ_PORTS);
    return { destination, peer: peerValue(rng), servicePort: portValue(rng, FUZZ_PORTS), authority: authorityValue(rng, destination), debug };
  }
  const destination = destinationValue(rng, known, FUZZ_PORTS);
  if (target.client && rng.chance(0.5)) return { destination, routePort: portValue(rng, FUZZ_PORTS), debug };
  return { destination, debug };
}

export function generateCase(target: Target, baseConfig: Record<string, unknown>, rng: Rng): FuzzCase {
  if (rng.chance(CONFIG_SHARE)) {
    const { bytes, note } = mutateConfig(rng, baseConfig);
    const connections = [connectionInput(target, rng), connectionInput(target, rng)];
    return { kind: "config", config: bytes, note, connections };
  }
  return { kind: "connection", connection: connectionInput(target, rng) };
}

// ---- JSON form (bytes as base64) --------------------------------------------------------------

export function caseToJson(value: unknown): unknown {
  if (value instanceof Uint8Array) return { base64: Buffer.from(value).toString("base64") };
  if (Array.isArray(value)) return value.map(caseToJson);
  if (value !== null && typeof value === "object") {
    return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined).map(([k, v]) => [k, caseToJson(v)]));
  }
  return value;
}

export function caseFromJson(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(caseFromJson);
  if (value !== null && typeof value === "object") {
    const obj = value as Record<string, unknown>;
    const keys = Object.keys(obj);
    if (keys.length === 1 && typeof obj.base64 === "string") return new Uint8Array(Buffer.from(obj.base64, "base64"));
    return Object.fromEntries(keys.map((k) => [k, caseFromJson(obj[k])]));
  }
  return value;
}

/**
 * The :authority text beside a destination: mostly the destination's canonical spelling (what a
 * client sidecar sends and original_dst then parses), sometimes absent or another spelling of the
 * same address, which the filter must refuse.
 */
function authorityValue(rng: Rng, destination: GeneratedValue): GeneratedValue {
  const utf8 = new TextEncoder();
  const roll = rng.int(100);
  if (roll < 5) return { bytes: undefined, validity: "invalid", label: "missing" };
  const canonical = destination.validity === "valid" ? destination.canonical : undefined;
  if (canonical !== undefined && roll < 15) {
    const respelled = rng.chance(0.5) ? canonical.replace(/:(\d+)$/, ":0$1") : `${canonical},${canonical}`;
    return { bytes: utf8.encode(respelled), validity: "invalid", label: "non-canonical authority" };
  }
  if (canonical !== undefined) return { bytes: utf8.encode(canonical), validity: "valid", canonical, label: "canonical authority" };
  return { bytes: destination.bytes, validity: "unsure", label: "authority as the destination bytes" };
}
