// The previous wire format's filter (tests/fixtures/wire_v2/README.md): its bytes, after checking
// that they are the recorded build.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT } from "./paths.js";

export const WIRE_V2_WASM = join(REPO_ROOT, "tests/fixtures/wire_v2/passthrough_mtls.wasm");
export const WIRE_V2_SHA256 = "b4fa4badb6adbb7ac921e034d8d9988a4620d6a2dd06cca3072ecb37460eefde";

export function wireV2Filter(): Uint8Array {
  const bytes = readFileSync(WIRE_V2_WASM);
  const digest = createHash("sha256").update(bytes).digest("hex");
  if (digest !== WIRE_V2_SHA256) throw new Error(`${WIRE_V2_WASM}: sha256 ${digest}, expected ${WIRE_V2_SHA256} (tests/fixtures/wire_v2/README.md)`);
  return new Uint8Array(bytes);
}
