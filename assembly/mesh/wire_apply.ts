// applyMeshMessage: the feed's binary messages (wire.ts) applied to the Mesh.
//
// - full: "the model is exactly these records". Built into a new Mesh sized from what the
//   records carry (never from the header's id limits, which only bound the ids), in two passes
//   over the message: every record checked (and the texts it names interned into the new
//   model; every membership must name a service of the message), then every record stored in
//   message order (addresses and VIPs checked against what is stored). Any problem refuses the
//   message and the new model is dropped: the caller keeps its old one.
// - delta: checked whole before the model is touched: every record (as for a full load), then
//   what spans records, on the state after the message (the last record of each id wins): an
//   address on one live workload per network, a VIP on one service per network, a hostname on
//   one service, memberships naming services that are live after it. Then applied in place:
//   every id the message names is cleared (a service id with a remove anywhere in the message
//   loses every membership), then the services' last upserts, then the workloads'. Cost is
//   O(records + their lists), whatever the mesh size.
// - no-change: checked against the model's epoch and version; a format-3 no-change at another
//   epoch or version is taken when it names the model's content digest (the feed restarted, or
//   another replica answers, and the model is already what it serves): the model adopts the
//   message's epoch and version.
// Nothing here traps on any input: reads are bounds-checked (wire.ts), ids are checked
// against the header's limits, which are checked against the model's own limits.
import { Mesh } from "./model";
import { MAX_SERVICES, MAX_WORKLOADS } from "./parse";
import {
  H_BASE,
  H_BODY,
  H_EPOCH,
  H_FORMAT,
  H_KIND,
  H_MAGIC,
  H_RECORDS,
  H_DIGEST,
  H_SERVICE_LIMIT,
  H_VERSION,
  H_WORKLOAD_LIMIT,
  HEADER_BYTES,
  KIND_DELTA,
  KIND_FULL,
  KIND_ASK_BUCKETS,
  KIND_NO_CHANGE,
  KIND_REPAIR,
  WIRE_MAGIC,
  WIRE_PREVIOUS_VERSION,
  WIRE_VERSION,
  WireReader,
} from "./wire";
import { Header } from "./wire_store";
import { loadFull } from "./wire_full";
import { applyDelta } from "./wire_delta";
import { applyRepair } from "./wire_repair";

/** What applyMeshMessage did. */
export class MeshApplyResult {
  /** The model to use from now on: the input one when refused (or changed in place). */
  mesh: Mesh | null = null;
  /** "" when applied, else one line naming the record and field. */
  error: string = "";
  /** KIND_FULL, KIND_DELTA, KIND_NO_CHANGE; 0 when the header could not be read. */
  kind: i32 = 0;
  epoch: u64 = 0;
  version: u64 = 0;

  ok(): bool {
    return this.error.length == 0;
  }
}

const reader = new WireReader();

/**
 * Applies one feed message to `mesh` (null: nothing loaded yet). Never traps. On success
 * `result.mesh` is the model to use (a new one after a full load, `mesh` itself after a delta
 * or no-change); on failure `result.error` says why and `result.mesh` is `mesh`, untouched.
 */
export function applyMeshMessage(mesh: Mesh | null, data: ArrayBuffer): MeshApplyResult {
  const result = new MeshApplyResult();
  result.mesh = mesh;
  const r = reader;
  r.reset(data);
  const h = new Header();
  if (!readHeader(r, h)) {
    result.error = r.error;
    return result;
  }
  result.kind = h.kind;
  result.epoch = h.epoch;
  result.version = h.version;
  if (h.kind == KIND_NO_CHANGE) {
    if (mesh === null) result.error = "header.kind: no-change, but no model is loaded";
    else if (mesh.epoch == h.epoch && mesh.version == h.version) {
      // the model is current
    } else if (h.format >= WIRE_VERSION && mesh.epoch != 0 && mesh.digestKnown && mesh.digest == h.digest) {
      mesh.epoch = h.epoch;
      mesh.version = h.version;
    } else {
      result.error = "header.version: no-change at epoch " + h.epoch.toString() + " version " + h.version.toString() +
        ", but the model is at epoch " + mesh.epoch.toString() + " version " + mesh.version.toString() +
        (h.format >= WIRE_VERSION ? " with another content digest" : "");
    }
    return result;
  }
  if (h.kind == KIND_FULL) {
    const fresh = loadFull(r, h);
    if (fresh === null) {
      result.error = r.error;
      return result;
    }
    setDigest(fresh, h);
    result.mesh = fresh;
    return result;
  }
  const what = h.kind == KIND_REPAIR ? "a repair" : "a delta";
  if (mesh === null) {
    result.error = "header.kind: " + what + ", but no model is loaded";
    return result;
  }
  if (h.kind == KIND_REPAIR) {
    // From any epoch and version: it states whole buckets, whatever the model's version.
    if (!applyRepair(mesh, r, h, data, HEADER_BYTES + h.body, data.byteLength)) result.error = r.error;
    else setDigest(mesh, h);
    return result;
  }
  if (mesh.epoch != h.epoch) {
    result.error = "header.epoch: delta for epoch " + h.epoch.toString() + ", but the model is at epoch " + mesh.epoch.toString();
    return result;
  }
  if (mesh.version != h.base) {
    result.error = "header.baseVersion: delta from version " + h.base.toString() + ", but the model is at version " + mesh.version.toString();
    return result;
  }
  if (!applyDelta(mesh, r, h)) result.error = r.error;
  else setDigest(mesh, h);
  return result;
}

function setDigest(m: Mesh, h: Header): void {
  m.digestKnown = h.format >= WIRE_VERSION;
  m.digest = m.digestKnown ? h.digest : 0;
}

function readHeader(r: WireReader, h: Header): bool {
  if (r.end < HEADER_BYTES) return r.fail("", "message of " + r.end.toString() + " bytes is shorter than the 56-byte header");
  if (r.u32At(H_MAGIC) != WIRE_MAGIC) return r.fail("magic", "not 0x3148534d (\"MSH1\")");
  const format = <u16>r.u16At(H_FORMAT);
  if (format != WIRE_VERSION && format != WIRE_PREVIOUS_VERSION) {
    return r.fail("formatVersion", format.toString() + " is not " + WIRE_VERSION.toString() + " or " + WIRE_PREVIOUS_VERSION.toString() + " (the formats this filter reads)");
  }
  h.format = format;
  const kind = <i32>r.u16At(H_KIND);
  const newest = format == WIRE_VERSION;
  if (kind == KIND_ASK_BUCKETS && newest) return r.fail("kind", "5 (a request for the model's bucket digests) carries no model");
  if (kind != KIND_FULL && kind != KIND_DELTA && kind != KIND_NO_CHANGE && !(newest && kind == KIND_REPAIR)) {
    return r.fail("kind", kind.toString() + " is not 1 (full), 2 (delta), 3 (no-change)" + (newest ? " or 4 (repair)" : ""));
  }
  h.kind = kind;
  h.epoch = r.u64At(H_EPOCH);
  h.base = r.u64At(H_BASE);
  h.version = r.u64At(H_VERSION);
  if (h.epoch == 0) return r.fail("epoch", "must not be 0");
  if (kind == KIND_DELTA && h.version <= h.base) return r.fail("version", "a delta must move forward (version " + h.version.toString() + " <= base " + h.base.toString() + ")");
  if (kind != KIND_DELTA && h.base != 0) return r.fail("baseVersion", "must be 0 outside a delta");
  h.digest = r.u64At(H_DIGEST);
  if (format == WIRE_PREVIOUS_VERSION && h.digest != 0) return r.fail("reserved", "must be 0");
  h.workloadLimit = r.u32At(H_WORKLOAD_LIMIT);
  h.serviceLimit = r.u32At(H_SERVICE_LIMIT);
  if (h.workloadLimit > <u32>MAX_WORKLOADS) return r.fail("workloadIdLimit", h.workloadLimit.toString() + " exceeds the limit of " + MAX_WORKLOADS.toString());
  if (h.serviceLimit > <u32>MAX_SERVICES) return r.fail("serviceIdLimit", h.serviceLimit.toString() + " exceeds the limit of " + MAX_SERVICES.toString());
  const body = r.u32At(H_BODY);
  // Format 3: the bucket trailer follows the body (read by the feed client, and by a repair).
  if (newest ? <i64>body > <i64>r.end - HEADER_BYTES : <i64>body != <i64>r.end - HEADER_BYTES) {
    return r.fail("bodyLength", body.toString() + (newest ? " exceeds" : " is not") + " the message length - 56 (" + (r.end - HEADER_BYTES).toString() + ")");
  }
  h.body = <i32>body;
  const records = r.u32At(H_RECORDS);
  if (kind == KIND_NO_CHANGE && records != 0) return r.fail("recordCount", "a no-change message has no records");
  if (<i64>records * 5 > <i64>body) return r.fail("recordCount", records.toString() + " records cannot fit in " + body.toString() + " bytes");
  h.records = <i32>records;
  r.pos = HEADER_BYTES;
  // Records end at the body's end; a repair reads its trailer after that itself.
  r.end = HEADER_BYTES + <i32>body;
  return true;
}

/** Bytes of messages applied or refused since the last full collection (collectAfterMessage). */
let messageBytesSinceCollect: i64 = 0;
/** A full collection after this many bytes of messages (a delta of 100 pod changes is ~10 KB). */
export const COLLECT_AFTER_MESSAGE_BYTES: i64 = 1 << 20;

/**
 * Runs the full collection after a full message (the old model, or a refused new one, and the
 * message are garbage) and after every COLLECT_AFTER_MESSAGE_BYTES of messages. With the
 * incremental collector alone, a churning VM's garbage (messages, per-message scratch) piled up
 * until linear memory doubled (10.7 to 21.5 MB at 100k pods, within 40k changes); collected this
 * way it stays flat. A full collection costs ~0.07 ms at 100k pods and ~0.26 ms at 1M. Call it
 * once the caller holds only the model in force.
 */
export function collectAfterMessage(kind: i32, bytes: i32): void {
  messageBytesSinceCollect += bytes;
  if (kind == KIND_FULL || messageBytesSinceCollect >= COLLECT_AFTER_MESSAGE_BYTES) {
    messageBytesSinceCollect = 0;
    __collect();
  }
}
