// Envoy's `set_envoy_filter_state` foreign function (1.28+) and the connection's filter state.
//
// The argument is the protobuf SetEnvoyFilterStateArguments {1: path, 2: value, 3: span}. The path
// is both the name of an object factory and the key: only keys with a registered factory can be
// written (NOT_FOUND otherwise), and the factory parses the value (BAD_ARGUMENT when it cannot).
// The validators below mirror those factories' createFromBytes for the keys Envoy registers.
import protobuf from "protobufjs";
import { WasmResult } from "./abi.js";
import { parseIpPort } from "./address.js";

export const FilterStateSpan = { FilterChain: 0, DownstreamRequest: 1, DownstreamConnection: 2 } as const;
export type FilterStateSpanName = keyof typeof FilterStateSpan;

const SPAN_NAMES: readonly FilterStateSpanName[] = ["FilterChain", "DownstreamRequest", "DownstreamConnection"];

/** absl::SimpleAtoi-style unsigned integer (surrounding whitespace and a leading '+' allowed). */
function unsignedInRange(value: string, max: bigint): boolean {
  const match = /^\s*\+?(\d+)\s*$/.exec(value);
  return match !== null && BigInt(match[1]!) <= max;
}

type Validator = (value: string) => boolean;
const anyValue: Validator = () => true;
const ipPort: Validator = (value) => parseIpPort(value) !== undefined;

/**
 * Keys with a filter-state object factory in Envoy (category `filter_state.object`), with what
 * their factory accepts. Values the factory would refuse are BAD_ARGUMENT.
 */
export const REGISTERED_FILTER_STATE_KEYS: ReadonlyMap<string, Validator> = new Map<string, Validator>([
  // tcp_proxy PerConnectionClusterFactory: any bytes, even empty (tcp_proxy then finds no cluster).
  ["envoy.tcp_proxy.cluster", anyValue],
  ["envoy.network.transport_socket.original_dst_address", ipPort],
  ["envoy.network.upstream_subject_alt_names", anyValue], // comma-separated list
  ["envoy.network.upstream_server_name", anyValue],
  ["envoy.network.application_protocols", anyValue], // comma-separated list
  ["envoy.filters.listener.original_dst.local_ip", ipPort],
  ["envoy.filters.listener.original_dst.remote_ip", ipPort],
  ["envoy.upstream.dynamic_host", anyValue],
  ["envoy.upstream.dynamic_port", (v) => unsignedInRange(v, 0xffffffffn)],
  ["envoy.tcp_proxy.disable_tunneling", (v) => v === "true" || v === "false"],
  ["envoy.tcp_proxy.per_connection_idle_timeout_ms", (v) => unsignedInRange(v, 0xffffffffffffffffn)],
  ["envoy.ratelimit.hits_addend", (v) => unsignedInRange(v, 0xffffffffn)],
  ["envoy.string", anyValue],
]);

// The argument message, read with protobufjs. path/value are declared `bytes` so invalid UTF-8
// can be refused the way C++ proto3 parsing refuses it (ParseFromString fails → BAD_ARGUMENT).
const SetEnvoyFilterStateArguments = protobuf.Root.fromJSON({
  nested: {
    SetEnvoyFilterStateArguments: {
      fields: {
        path: { type: "bytes", id: 1 },
        value: { type: "bytes", id: 2 },
        span: { type: "int32", id: 3 },
      },
    },
  },
}).lookupType("SetEnvoyFilterStateArguments");

const strictUtf8 = new TextDecoder("utf-8", { fatal: true });

export interface FilterStateArguments {
  readonly key: string;
  readonly value: string;
  readonly span: number;
}

/** Decodes the foreign function's argument, or undefined when Envoy's parse would fail. */
export function decodeFilterStateArguments(bytes: Uint8Array): FilterStateArguments | undefined {
  try {
    const message = SetEnvoyFilterStateArguments.decode(bytes) as unknown as {
      path?: Uint8Array | number[];
      value?: Uint8Array | number[];
      span?: number;
    };
    // An absent or empty bytes field decodes to protobufjs's default, a plain empty array.
    const asBytes = (field: Uint8Array | number[] | undefined) =>
      field instanceof Uint8Array ? field : Uint8Array.from(field ?? []);
    return {
      key: strictUtf8.decode(asBytes(message.path)),
      value: strictUtf8.decode(asBytes(message.value)),
      span: message.span ?? 0,
    };
  } catch {
    return undefined;
  }
}

/** Status Envoy's factory lookup and parse give for `key`/`value` (Ok when accepted). */
export function validateFilterState(key: string, value: string): number {
  const validator = REGISTERED_FILTER_STATE_KEYS.get(key);
  if (validator === undefined) return WasmResult.NotFound;
  return validator(value) ? WasmResult.Ok : WasmResult.BadArgument;
}

export function spanName(span: number): FilterStateSpanName | `unknown(${number})` {
  return SPAN_NAMES[span] ?? `unknown(${span})`;
}

/** One accepted write, in call order. `source` tells set_envoy_filter_state from set_property. */
export interface FilterStateWrite {
  readonly key: string;
  readonly value: string;
  /** Raw bytes (set_property values are bytes; filter-state values are their UTF-8). */
  readonly bytes: Uint8Array;
  readonly span: FilterStateSpanName | `unknown(${number})`;
  readonly source: "set_envoy_filter_state" | "set_property" | "existing";
}

const utf8 = new TextEncoder();
const lenientUtf8 = new TextDecoder("utf-8");

/** A connection's filter state: latest value per key plus every accepted write in order. */
export class FilterStateStore {
  readonly writes: FilterStateWrite[] = [];
  private readonly values = new Map<string, FilterStateWrite>();

  setObject(key: string, value: string, span: number): void {
    this.record({ key, value, bytes: utf8.encode(value), span: spanName(span), source: "set_envoy_filter_state" });
  }

  /** proxy_set_property stores bytes under `wasm.<path>` (Envoy's CelState, life span FilterChain). */
  setWasmProperty(key: string, bytes: Uint8Array): void {
    this.record({ key, value: lenientUtf8.decode(bytes), bytes, span: "FilterChain", source: "set_property" });
  }

  /** State that existed before the filter ran: readable, but not one of the filter's writes. */
  seed(key: string, bytes: Uint8Array): void {
    this.values.set(key, { key, value: lenientUtf8.decode(bytes), bytes, span: "FilterChain", source: "existing" });
  }

  private record(write: FilterStateWrite): void {
    this.writes.push(write);
    this.values.set(write.key, write);
  }

  get(key: string): FilterStateWrite | undefined {
    return this.values.get(key);
  }

  /** key → latest value (as a string). */
  snapshot(): Map<string, string> {
    return new Map([...this.values].map(([key, write]) => [key, write.value]));
  }
}
