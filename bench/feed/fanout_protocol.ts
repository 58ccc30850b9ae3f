// The /delta protocol as a fan-out poller speaks it (feed/docs/deltas.md): what a poll asks,
// and how an answer moves what the poller holds. It is the only part of the fan-out bench that
// knows the protocol, so that a change of it (content-based versions, a client stating what it
// holds) is a change of this file. The rules are the filters' feed client's
// (assembly/runtime/feed_client.ts `take`, assembly/runtime/feed_message.ts): a poller reads the
// fixed header only and keeps its position; the records themselves are the model's business and
// cost the bench's pollers nothing (the feed's cost is the same either way).

/** What a poller holds: the feed's epoch and version of its model (0/0: nothing yet). */
export interface Position {
  epoch: number;
  version: number;
}

export const NOTHING: Position = { epoch: 0, version: 0 };

/** The fixed header's size: a poller needs these bytes of an answer, and counts the rest. */
export const HEADER_BYTES = 56;
const MAGIC = 0x3148534d; // "MSH1"
const FORMAT = 2;
export const CONTENT_TYPE = "application/x-mesh-delta";

export type AnswerKind = "full" | "delta" | "no-change";
const KINDS: Record<number, AnswerKind> = { 1: "full", 2: "delta", 3: "no-change" };

export interface Header {
  kind: AnswerKind;
  epoch: number;
  base: number;
  version: number;
}

/** The request path of one poll from `at` (after a refused answer the client asks for a full model). */
export function pollPath(target: string, at: Position, waitSeconds: number): string {
  return `/delta/${encodeURIComponent(target)}?epoch=${at.epoch}&version=${at.version}&wait=${waitSeconds}`;
}

/** Reads the header of an answer of `length` bytes whose first bytes are `head`; a string says why it is not one. */
export function readHeader(head: Buffer, length: number): Header | string {
  if (head.length < HEADER_BYTES) return `answer of ${length} bytes is shorter than the ${HEADER_BYTES}-byte header`;
  if (head.readUInt32LE(0) !== MAGIC) return "header.magic: not a mesh feed message";
  if (head.readUInt16LE(4) !== FORMAT) return `header.formatVersion: ${head.readUInt16LE(4)}`;
  const kind = KINDS[head.readUInt16LE(6)];
  if (!kind) return `header.kind: ${head.readUInt16LE(6)}`;
  const u64 = (at: number) => head.readUInt32LE(at) + head.readUInt32LE(at + 4) * 2 ** 32;
  if (head.readUInt32LE(44) !== length - HEADER_BYTES) return `header.bodyLength: ${head.readUInt32LE(44)} for ${length - HEADER_BYTES} bytes`;
  return { kind, epoch: u64(8), base: u64(16), version: u64(24) };
}

/**
 * Where an answer leaves a poller at `at`: a full message is taken whole, a delta only from the
 * poller's own epoch and version, a no-change only at them. A string: refused (the client then
 * asks for a full model).
 */
export function take(at: Position, h: Header): Position | string {
  if (h.kind === "no-change") return h.epoch === at.epoch && h.version === at.version ? at : `no-change at ${h.epoch}/${h.version}, poller at ${at.epoch}/${at.version}`;
  if (h.kind === "delta" && (h.epoch !== at.epoch || h.base !== at.version)) return `delta from ${h.epoch}/${h.base}, poller at ${at.epoch}/${at.version}`;
  return { epoch: h.epoch, version: h.version };
}

/** Whether a poller at `at` has everything the feed published up to (epoch, version). */
export function holds(at: Position, epoch: number, version: number): boolean {
  return at.epoch === epoch && at.version >= version;
}
