// Hand-written proxy-wasm modules (WAT, assembled with binaryen) for bench/envoy/profile.ts: each
// one adds one layer of what a wasm network filter costs Envoy per connection, with no
// AssemblyScript runtime in between, so the layers can be told apart by measurement:
//   bare       exports only what Envoy requires (ABI marker, malloc, memory): Envoy still builds a
//              wasm Context per connection, but never enters the VM for it;
//   callbacks  + the seven per-connection callbacks our runtime exports (context_create,
//              new_connection, downstream/upstream close, done, log, delete), all empty;
//   getprop    callbacks + on_new_connection reads destination.address (Envoy calls malloc back);
//   setprop    callbacks + on_new_connection writes the property lb_address (filter state);
//   hostcalls  callbacks + exactly the host calls passthrough_mtls makes on its plain path:
//              get_property(destination.address), set_property(lb_address), 2 counter
//              increments, get_log_level;
//   newconn            only proxy_on_new_connection exported (empty): a filter that keeps no
//                      per-connection state needs no other per-connection callback;
//   newconn_hostcalls  newconn + the hostcalls body (today's plain-path host calls);
//   newconn_min        newconn + get_property(destination.address) + one counter increment
//                      (the plain path without set_property(lb_address), the second counter
//                      and the log-level query);
//   filterstate        callbacks + one set_envoy_filter_state (proxy_call_foreign_function)
//                      writing envoy.tcp_proxy.cluster = PassthroughCluster (same route);
//   newconn_fs         newconn_min + that one set_envoy_filter_state (the plain path's cost
//                      of one Envoy filter-state object);
//   newconn_prop       newconn_min + one set_property (the cost of one wasm.* property);
// and the floor of each HBONE job (JOB_FIXTURES): newconn_min + exactly the values that job
// must write for the bench's one destination, as constants (no lookup, no formatting), so
// each HBONE path's ratio can be set against the least any wasm filter doing it costs.
// Not part of npm test. Written to build/profile/<name>.wasm.
import binaryen from "binaryen";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";

/** One value a job fixture writes: an Envoy filter-state object (foreign function) or a wasm property. */
export type Write = { filterState: string; value: string } | { property: string; value: string };

/**
 * The values each HBONE job needs for the benchmark's destination (what the shipped filter
 * writes there, checked against it by tests/host), in the filter's order:
 *   tunnel_port hbone     SANs, original_dst_address (= the :authority; the cluster overrides the
 *                         port), service_port, cluster;
 *   waypoint_route hbone  SANs, original_dst_address, authority, cluster;
 *   double hbone          SANs, authority, outer authority, outer address, outer SANs, cluster.
 */
export const JOB_WRITES = {
  job_tunnel_port: [
    { filterState: "envoy.network.upstream_subject_alt_names", value: "spiffe://cluster.local/ns/default/sa/my-service" },
    { filterState: "envoy.network.transport_socket.original_dst_address", value: "127.0.0.21:9376" },
    { property: "service_port", value: "80" },
    { filterState: "envoy.tcp_proxy.cluster", value: "tunnel_port_hbone" },
  ],
  job_waypoint_hbone: [
    { filterState: "envoy.network.upstream_subject_alt_names", value: "spiffe://cluster.local/ns/default/sa/waypoint" },
    { filterState: "envoy.network.transport_socket.original_dst_address", value: "127.0.0.41:15008" },
    { property: "authority", value: "127.10.1.1:80" },
    { filterState: "envoy.tcp_proxy.cluster", value: "waypoint_route_hbone" },
  ],
  job_waypoint_double: [
    { filterState: "envoy.network.upstream_subject_alt_names", value: "spiffe://cluster.local/ns/default/sa/waypoint" },
    { property: "authority", value: "my-svc.default.svc.cluster.local:80" },
    { property: "outer_authority", value: "my-svc.default.svc.cluster.local:80" },
    { property: "outer_address", value: "127.0.0.51:15008" },
    { property: "outer_sans", value: "spiffe://cluster.local/ns/istio-system/sa/eastwest" },
    { filterState: "envoy.tcp_proxy.cluster", value: "waypoint_route_double_hbone" },
  ],
} as const satisfies Record<string, readonly Write[]>;
export type JobFixture = keyof typeof JOB_WRITES;

const SINGLE_WRITES = {
  newconn_fs: [{ filterState: "envoy.tcp_proxy.cluster", value: "PassthroughCluster" }],
  newconn_prop: [{ property: "lb_address", value: "127.0.0.12:8080" }],
} as const satisfies Record<string, readonly Write[]>;

export const FIXTURES = [
  "bare", "callbacks", "getprop", "setprop", "hostcalls", "newconn", "newconn_hostcalls", "newconn_min", "filterstate",
  ...(Object.keys(SINGLE_WRITES) as (keyof typeof SINGLE_WRITES)[]),
  ...(Object.keys(JOB_WRITES) as JobFixture[]),
] as const;
export type Fixture = (typeof FIXTURES)[number];

const WRITES: Partial<Record<Fixture, readonly Write[]>> = { ...SINGLE_WRITES, ...JOB_WRITES };

/** Bytes as a WAT string literal. */
const watBytes = (bytes: Uint8Array): string => Array.from(bytes, (b) => "\\" + b.toString(16).padStart(2, "0")).join("");

/** A protobuf length-delimited field (lengths < 16384: one or two varint bytes). */
function lengthField(field: number, bytes: Uint8Array): number[] {
  const n = bytes.length;
  const length = n < 128 ? [n] : [(n & 0x7f) | 0x80, n >> 7];
  return [(field << 3) | 2, ...length, ...bytes];
}

/**
 * The data segments and the body for `writes`, placed from `base` on: each filter-state write
 * is proxy_call_foreign_function("set_envoy_filter_state", SetEnvoyFilterStateArguments{path,
 * value, span: FilterChain}); each property write is proxy_set_property(name, value).
 */
function writesCode(writes: readonly Write[], base: number): { data: string; body: string } {
  const utf8 = (text: string) => new TextEncoder().encode(text);
  let at = base;
  const segments: string[] = [];
  const place = (bytes: Uint8Array): [number, number] => {
    const where = at;
    segments.push(`  (data (i32.const ${where}) "${watBytes(bytes)}")`);
    at += (bytes.length + 15) & ~15;
    return [where, bytes.length];
  };
  let body = "";
  for (const write of writes) {
    if ("filterState" in write) {
      const args = new Uint8Array([...lengthField(1, utf8(write.filterState)), ...lengthField(2, utf8(write.value)), 0x18, 0x00]);
      const [ptr, len] = place(args);
      body += `
    (global.set $heap (i32.const 4096))
    (drop (call $call_foreign (i32.const 1120) (i32.const 22) (i32.const ${ptr}) (i32.const ${len}) (i32.const 512) (i32.const 516)))`;
    } else {
      const [name, nameLength] = place(utf8(write.property));
      const [value, valueLength] = place(utf8(write.value));
      body += `
    (drop (call $set_property (i32.const ${name}) (i32.const ${nameLength}) (i32.const ${value}) (i32.const ${valueLength})))`;
    }
  }
  if (at > 4096) throw new Error("profile fixture data overruns the heap at 4096");
  return { data: segments.join("\n"), body };
}
const WRITES_BASE = 1280;

// Memory layout: out-params at 512/516, log level at 520, metric ids at 528/532, constant
// strings from 1024, a bump heap for malloc from 4096 (reset at every on_new_connection).
const DATA = `
  (data (i32.const 1024) "destination\\00address")
  (data (i32.const 1056) "lb_address")
  (data (i32.const 1072) "127.0.0.12:8080")
  (data (i32.const 1088) "profile.plain_a")
  (data (i32.const 1104) "profile.plain_b")
  (data (i32.const 1120) "set_envoy_filter_state")
  (data (i32.const 1152) "\\0a\\17\\65\\6e\\76\\6f\\79\\2e\\74\\63\\70\\5f\\70\\72\\6f\\78\\79\\2e\\63\\6c\\75\\73\\74\\65\\72\\12\\12\\50\\61\\73\\73\\74\\68\\72\\6f\\75\\67\\68\\43\\6c\\75\\73\\74\\65\\72\\18\\00")`;
/** {1: "envoy.tcp_proxy.cluster", 2: "PassthroughCluster", 3: FilterChain}, protobuf-encoded at 1152. */
const FILTER_STATE_ARGS_SIZE = 47;

const GET_PROPERTY = `
    (global.set $heap (i32.const 4096))
    (i64.store (i32.const 512) (i64.const 0))
    (drop (call $get_property (i32.const 1024) (i32.const 19) (i32.const 512) (i32.const 516)))`;
const SET_PROPERTY = `
    (drop (call $set_property (i32.const 1056) (i32.const 10) (i32.const 1072) (i32.const 15)))`;
const COUNTERS_AND_LOG_LEVEL = `
    (drop (call $increment_metric (i32.load (i32.const 528)) (i64.const 1)))
    (drop (call $increment_metric (i32.load (i32.const 532)) (i64.const 1)))
    (drop (call $get_log_level (i32.const 520)))`;

const SET_FILTER_STATE = `
    (global.set $heap (i32.const 4096))
    (i64.store (i32.const 512) (i64.const 0))
    (drop (call $call_foreign (i32.const 1120) (i32.const 22) (i32.const 1152) (i32.const ${FILTER_STATE_ARGS_SIZE}) (i32.const 512) (i32.const 516)))`;
const ONE_COUNTER = `
    (drop (call $increment_metric (i32.load (i32.const 528)) (i64.const 1)))`;

function newConnectionBody(fixture: Fixture): string {
  const writes = WRITES[fixture];
  if (writes) return GET_PROPERTY + ONE_COUNTER + writesCode(writes, WRITES_BASE).body;
  switch (fixture) {
    case "getprop":
      return GET_PROPERTY;
    case "setprop":
      return SET_PROPERTY;
    case "hostcalls":
    case "newconn_hostcalls":
      return GET_PROPERTY + SET_PROPERTY + COUNTERS_AND_LOG_LEVEL;
    case "filterstate":
      return SET_FILTER_STATE;
    case "newconn_min":
      return GET_PROPERTY + ONE_COUNTER;
    default:
      return "";
  }
}

export function fixtureWat(fixture: Fixture): string {
  const newConnection = `
  (func (export "proxy_on_new_connection") (param i32) (result i32)${newConnectionBody(fixture)}
    (i32.const 0))`;
  const callbacks = fixture === "bare" ? "" : fixture.startsWith("newconn") || fixture.startsWith("job_") ? newConnection : `
  (func (export "proxy_on_context_create") (param i32 i32))
  (func (export "proxy_on_new_connection") (param i32) (result i32)${newConnectionBody(fixture)}
    (i32.const 0))
  (func (export "proxy_on_downstream_connection_close") (param i32 i32))
  (func (export "proxy_on_upstream_connection_close") (param i32 i32))
  (func (export "proxy_on_done") (param i32) (result i32) (i32.const 1))
  (func (export "proxy_on_log") (param i32))
  (func (export "proxy_on_delete") (param i32))`;
  return `(module
  (import "env" "proxy_get_property" (func $get_property (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_set_property" (func $set_property (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_define_metric" (func $define_metric (param i32 i32 i32 i32) (result i32)))
  (import "env" "proxy_increment_metric" (func $increment_metric (param i32 i64) (result i32)))
  (import "env" "proxy_get_log_level" (func $get_log_level (param i32) (result i32)))
  (import "env" "proxy_call_foreign_function" (func $call_foreign (param i32 i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  ${DATA}
${WRITES[fixture] ? writesCode(WRITES[fixture]!, WRITES_BASE).data : ""}
  (global $heap (mut i32) (i32.const 4096))
  (func (export "_initialize"))
  (func (export "proxy_abi_version_0_2_1"))
  (func (export "malloc") (param $size i32) (result i32) (local $at i32)
    (local.set $at (global.get $heap))
    (global.set $heap (i32.add (global.get $heap) (i32.and (i32.add (local.get $size) (i32.const 15)) (i32.const -16))))
    (if (i32.gt_u (global.get $heap) (i32.const 60000)) (then (global.set $heap (i32.const 4096))))
    (local.get $at))
  (func (export "proxy_on_vm_start") (param i32 i32) (result i32) (i32.const 1))
  (func (export "proxy_on_configure") (param i32 i32) (result i32)
    (drop (call $define_metric (i32.const 0) (i32.const 1088) (i32.const 15) (i32.const 528)))
    (drop (call $define_metric (i32.const 0) (i32.const 1104) (i32.const 15) (i32.const 532)))
    (i32.const 1))${callbacks}
)`;
}

/** Assembles every fixture into `dir`/<name>.wasm; returns the paths by name. */
export function buildFixtures(dir: string): Record<Fixture, string> {
  mkdirSync(dir, { recursive: true });
  const paths = {} as Record<Fixture, string>;
  for (const fixture of FIXTURES) {
    const module = binaryen.parseText(fixtureWat(fixture));
    if (!module.validate()) throw new Error(`profile fixture ${fixture} does not validate`);
    const path = join(dir, `${fixture}.wasm`);
    writeFileSync(path, module.emitBinary());
    module.dispose();
    paths[fixture] = path;
  }
  return paths;
}
