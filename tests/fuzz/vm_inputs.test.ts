// Inputs every filter's runtime reads before its own code runs: the `plugin_root_id` property
// (which filter of the module to build) and the VM configuration (vm_config.configuration).
// Any bytes: never a trap. A module holds one filter and the runtime falls back to the first
// registered filter for a root id it does not know (assembly/runtime/context.ts factoryFor), so
// any root id builds that filter; VM configuration is ignored by every filter.
// Run: node --import tsx --test tests/fuzz/vm_inputs.test.ts
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { describe, it } from "node:test";
import { ProxyWasmHost } from "../../host/index.js";
import { Rng } from "./rng.js";
import { FUZZ_SNAPSHOT, TARGETS } from "./targets.js";

const utf8 = (s: string) => new TextEncoder().encode(s);
const FILTERS = [...new Set(TARGETS.map((t) => t.filter))];
const wasm = (filter: string) => new Uint8Array(readFileSync(new URL(`../../build/${filter}.wasm`, import.meta.url)));
const configOf = (filter: string) => JSON.stringify(TARGETS.find((t) => t.filter === filter)!.baseConfig(FUZZ_SNAPSHOT));

const WRONG_ROOT_IDS: [string, Uint8Array][] = [
  ["empty", utf8("")],
  ["another name", utf8("x")],
  ["trailing NUL", utf8("probe\0")],
  ["invalid UTF-8", Uint8Array.of(0xff, 0xfe, 0x70)],
  ["huge", utf8("p".repeat(100_000))],
  ["int64", Uint8Array.of(1, 0, 0, 0, 0, 0, 0, 0)],
];

describe("plugin_root_id and VM configuration, any bytes", () => {
  for (const filter of FILTERS) {
    it(`${filter}: any root id builds the module's filter, without a trap`, () => {
      const module = wasm(filter);
      for (const [label, bytes] of WRONG_ROOT_IDS) {
        const ids = label === "another name" ? [bytes, ...FILTERS.filter((f) => f !== filter).map(utf8)] : [bytes];
        for (const id of ids) {
          const host = ProxyWasmHost.fromBytes(module, { rootId: filter, properties: { plugin_root_id: id }, pluginConfiguration: configOf(filter), canary: false });
          assert.equal(host.start(), true, `${label}: ${host.startFailure}`);
          assert.equal(host.failed, false, `${label}: trapped: ${host.trapMessage}`);
          assert.deepEqual(host.logLines("error"), [], label);
          // it is the filter: its outcome counters move
          host.connect({});
          assert.ok([...host.metrics()].some(([name, value]) => name.startsWith(`${filter}.`) && value > 0), `${label}: no ${filter} counter moved`);
        }
      }
    });

    it(`${filter}: any VM configuration is ignored`, () => {
      const module = wasm(filter);
      const rng = new Rng(7);
      const configurations = [utf8(""), utf8("{}"), utf8("x".repeat(200_000)), Uint8Array.of(0xc0, 0x80), ...Array.from({ length: 20 }, () => rng.bytes(rng.range(1, 4096)))];
      for (const vmConfiguration of configurations) {
        const host = ProxyWasmHost.fromBytes(module, { rootId: filter, vmConfiguration, pluginConfiguration: configOf(filter), canary: false });
        assert.equal(host.start(), true, host.startFailure ?? "");
        assert.deepEqual(host.logLines("error"), []);
      }
    });
  }
});
