// The fixed 56-byte header of a mesh feed message (format 3, or the previous format 2; little-endian; the records after
// it are the mesh model's business: assembly/mesh decodes and applies them). The feed client
// reads the header before anything is applied, to decide what the message is to this VM: a full
// model, a delta from the version it has, or "no change".
export const MESSAGE_MAGIC: u32 = 0x3148534d; // "MSH1"
/** The format this build declares in its polls (`format=3`); it reads the previous one too. */
export const MESSAGE_FORMAT: u16 = 3;
export const PREVIOUS_MESSAGE_FORMAT: u16 = 2;
export const HEADER_BYTES: i32 = 56;
export const KIND_FULL: u16 = 1;
export const KIND_DELTA: u16 = 2;
export const KIND_NO_CHANGE: u16 = 3;
/** Format 3: the records of the buckets the trailer lists, exactly (an answer to a POST of this VM's bucket digests). */
export const KIND_REPAIR: u16 = 4;
/** Format 3: the feed cannot send a delta from this VM's version and asks for its bucket digests. */
export const KIND_ASK_BUCKETS: u16 = 5;
export const CONTENT_TYPE = "application/x-mesh-delta";

export class FeedHeader {
  format: u16 = 0;
  /** Format 3: the feed's content digest of the model after this message (format 2: 0). */
  digest: u64 = 0;
  kind: u16 = 0;
  /** Where the body ends: a format-3 message's bucket trailer runs from here to the end. */
  bodyEnd: i32 = 0;
  epoch: u64 = 0;
  base: u64 = 0;
  version: u64 = 0;
  /** "" when the header is well formed; else why not (one line). */
  error: string = "";
}

/** Reads and checks the header of `message`; never traps (every read is bounds-checked first). */
export function readFeedHeader(message: ArrayBuffer, into: FeedHeader): FeedHeader {
  into.error = "";
  into.kind = 0;
  const size = message.byteLength;
  if (size < HEADER_BYTES) {
    into.error = "message of " + size.toString() + " bytes is shorter than the 56-byte header";
    return into;
  }
  const at = changetype<usize>(message);
  if (load<u32>(at) != MESSAGE_MAGIC) {
    into.error = "header.magic: not a mesh feed message";
    return into;
  }
  const format = load<u16>(at + 4);
  if (format != MESSAGE_FORMAT && format != PREVIOUS_MESSAGE_FORMAT) {
    into.error = "header.formatVersion: " + format.toString() + " is not supported (this build reads " + MESSAGE_FORMAT.toString() + " and " + PREVIOUS_MESSAGE_FORMAT.toString() + ")";
    return into;
  }
  const kind = load<u16>(at + 6);
  const epoch = load<u64>(at + 8);
  const base = load<u64>(at + 16);
  const version = load<u64>(at + 24);
  const bodyLength = load<u32>(at + 44);
  const newest = format == MESSAGE_FORMAT;
  const lastKind = newest ? KIND_ASK_BUCKETS : KIND_NO_CHANGE;
  if (kind < KIND_FULL || kind > lastKind) into.error = "header.kind: " + kind.toString() + " is none of 1 (full), 2 (delta), 3 (no change)" + (newest ? ", 4 (repair), 5 (ask for buckets)" : "");
  else if (epoch == 0) into.error = "header.epoch: must not be 0";
  else if (newest ? <i64>bodyLength > <i64>size - HEADER_BYTES : <i64>bodyLength != <i64>size - HEADER_BYTES) {
    into.error = "header.bodyLength: " + bodyLength.toString() + " but the message has " + (size - HEADER_BYTES).toString() + " bytes after the header";
  }
  else if (format == PREVIOUS_MESSAGE_FORMAT && load<u64>(at + 48) != 0) into.error = "header.reserved: must be 0";
  else if (kind == KIND_DELTA && version <= base) into.error = "header.version: a delta must end above its base version";
  else if (kind != KIND_DELTA && base != 0) into.error = "header.baseVersion: must be 0 for a full or no-change message";
  if (into.error.length > 0) return into;
  into.format = format;
  into.bodyEnd = HEADER_BYTES + <i32>bodyLength;
  into.digest = format == PREVIOUS_MESSAGE_FORMAT ? 0 : load<u64>(at + 48);
  into.kind = kind;
  into.epoch = epoch;
  into.base = base;
  into.version = version;
  return into;
}

/**
 * True for `application/x-mesh-delta`, in any letter case, alone or followed by parameters
 * (`; ...`) or spaces: a media type is case-insensitive and a server may add a parameter.
 */
export function isMessageContentType(value: string): bool {
  const n = CONTENT_TYPE.length;
  if (value.length < n) return false;
  for (let i = 0; i < n; i++) {
    let c = value.charCodeAt(i);
    if (c >= 0x41 && c <= 0x5a) c += 0x20;
    if (c != CONTENT_TYPE.charCodeAt(i)) return false;
  }
  if (value.length == n) return true;
  const next = value.charCodeAt(n);
  return next == 0x3b || next == 0x20 || next == 0x09; // ';', space, tab
}

/** `v` as 16 lowercase hex digits (the poll's `digest` parameter). */
export function hex16(v: u64): string {
  let out = "";
  for (let shift: i32 = 60; shift >= 0; shift -= 4) {
    const d = <i32>((v >> <u64>shift) & 0xf);
    out += String.fromCharCode(d < 10 ? 0x30 + d : 0x57 + d);
  }
  return out;
}
