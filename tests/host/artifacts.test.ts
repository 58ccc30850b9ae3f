// Every filter the build produces must be loadable by Envoy: the ABI marker, the reactor entry,
// malloc and the network callbacks exported, and no import Envoy does not provide. And out of
// the data path: no filter reads connection bytes, so none exports a data callback (Envoy then
// never enters the VM for a data chunk).
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, it } from "node:test";
import { checkModule } from "../../host/index.js";
import { REPO_ROOT } from "../support/paths.js";

const REQUIRED_EXPORTS = [
  "proxy_abi_version_0_2_1",
  "_initialize",
  "malloc",
  "memory",
  "proxy_on_context_create",
  "proxy_on_vm_start",
  "proxy_on_configure",
  "proxy_on_new_connection",
  "proxy_on_delete",
];

/**
 * The per-connection callbacks assembly/runtime/exports exports. A filter that keeps nothing per
 * connection re-exports assembly/runtime/exports_stateless instead, which leaves them out so
 * that Envoy enters its VM three times per connection, not seven: it must not export them.
 */
const STATEFUL_CALLBACKS = ["proxy_on_downstream_connection_close", "proxy_on_upstream_connection_close", "proxy_on_done", "proxy_on_log"];
const isStateless = (name: string) => /runtime\/exports_stateless"/.test(readFileSync(join(REPO_ROOT, "filters", name, "index.ts"), "utf8"));

/** Envoy calls these for every chunk of bytes, when the module exports them. */
const DATA_CALLBACKS = ["proxy_on_downstream_data", "proxy_on_upstream_data"];

const filters = readdirSync(join(REPO_ROOT, "filters")).filter((name) =>
  existsSync(join(REPO_ROOT, "filters", name, "index.ts")),
);

describe("built filters", () => {
  for (const name of filters) {
    it(`build/${name}.wasm exports the network ABI and imports only what Envoy provides`, () => {
      const path = join(REPO_ROOT, "build", `${name}.wasm`);
      assert.ok(existsSync(path), `${path} missing: npm test builds it (npm run build)`);
      const bytes = new Uint8Array(readFileSync(path));
      checkModule(bytes); // throws ModuleRefusedError naming the import Envoy would refuse
      const exports = WebAssembly.Module.exports(new WebAssembly.Module(bytes)).map((entry) => entry.name);
      for (const name of REQUIRED_EXPORTS) assert.ok(exports.includes(name), `missing export ${name}`);
      const stateless = isStateless(name);
      for (const callback of STATEFUL_CALLBACKS) {
        assert.equal(exports.includes(callback), !stateless, `${name} ${stateless ? "re-exports exports_stateless but exports" : "does not export"} ${callback}`);
      }
      for (const name of DATA_CALLBACKS) assert.ok(!exports.includes(name), `exports ${name}: Envoy would call into the VM for every chunk`);
      const imports = WebAssembly.Module.imports(new WebAssembly.Module(bytes));
      assert.deepEqual(imports.filter((entry) => entry.module !== "env" || !entry.name.startsWith("proxy_")), []);
    });
  }
});
