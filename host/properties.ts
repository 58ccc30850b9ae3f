// Envoy properties: a tree keyed by path segments, with values already in Envoy's wire encoding.
//
// The guest sends a path as segments joined by NUL ("destination\0address"); each segment is one
// step down the tree, so the dotted form "destination.address" is a single (unknown) segment and
// NOT_FOUND, as in Envoy. Encodings (Envoy's serializeValue): strings raw UTF-8, integers 8-byte
// little-endian, bools 1 byte, durations/timestamps int64 nanoseconds, bytes/messages raw.
import { WasmResult } from "./abi.js";
import type { PropertyResult } from "./context.js";
import { nodeSubProperty } from "./node.js";

/** A property value in its Envoy encoding. */
export type PropertyBytes = Uint8Array;
export type PropertyNode = PropertyBytes | PropertyMap;
export type PropertyMap = Map<string, PropertyNode>;

/**
 * What tests pass in: strings, integers (number/bigint → int64), booleans, raw bytes, or nested
 * plain objects for sub-trees. Use the encoders below for uint64, durations and timestamps.
 */
export type PropertyInput = string | number | bigint | boolean | Uint8Array | PropertyInputTree;
export interface PropertyInputTree {
  [segment: string]: PropertyInput;
}

const utf8 = new TextEncoder();

export function int64(value: number | bigint): PropertyBytes {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigInt64(0, BigInt(value), true);
  return out;
}

export function uint64(value: number | bigint): PropertyBytes {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt(value), true);
  return out;
}

export function float64(value: number): PropertyBytes {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setFloat64(0, value, true);
  return out;
}

export function bool(value: boolean): PropertyBytes {
  return Uint8Array.of(value ? 1 : 0);
}

export function string(value: string): PropertyBytes {
  return utf8.encode(value);
}

/** A duration, encoded as Envoy does: int64 nanoseconds. */
export function durationNs(nanoseconds: number | bigint): PropertyBytes {
  return int64(nanoseconds);
}

/** A timestamp, encoded as Envoy does: int64 nanoseconds since the Unix epoch. */
export function timestampNs(nanoseconds: number | bigint): PropertyBytes {
  return int64(nanoseconds);
}

export function encodeProperty(value: Exclude<PropertyInput, PropertyInputTree>): PropertyBytes {
  if (value instanceof Uint8Array) return value;
  switch (typeof value) {
    case "string":
      return string(value);
    case "boolean":
      return bool(value);
    case "bigint":
      return int64(value);
    case "number":
      if (!Number.isInteger(value)) {
        throw new Error(`property value ${value}: only integers encode to int64; use float64()`);
      }
      return int64(value);
    default:
      throw new Error(`unsupported property value ${String(value)}`);
  }
}

function isTree(value: PropertyInput): value is PropertyInputTree {
  return typeof value === "object" && value !== null && !(value instanceof Uint8Array);
}

/** Builds a tree from nested plain objects. */
export function buildPropertyTree(input: PropertyInputTree | undefined): PropertyMap {
  const tree: PropertyMap = new Map();
  if (input === undefined) return tree;
  for (const [segment, value] of Object.entries(input)) {
    tree.set(segment, isTree(value) ? buildPropertyTree(value) : encodeProperty(value));
  }
  return tree;
}

/** Deep merge: `source` wins for leaves, sub-trees merge. Returns `target`. */
export function mergePropertyTrees(target: PropertyMap, source: PropertyMap): PropertyMap {
  for (const [segment, node] of source) {
    const existing = target.get(segment);
    if (existing instanceof Map && node instanceof Map) {
      mergePropertyTrees(existing, node);
    } else {
      target.set(segment, node instanceof Map ? mergePropertyTrees(new Map(), node) : node);
    }
  }
  return target;
}

/** Splits a guest path the way Envoy does: on NUL; a trailing NUL adds no empty segment. */
export function splitPropertyPath(path: string): string[] {
  const segments: string[] = [];
  let start = 0;
  while (start < path.length) {
    let end = path.indexOf("\0", start);
    if (end < 0) end = path.length;
    segments.push(path.slice(start, end));
    start = end + 1;
  }
  return segments;
}

/**
 * What the host answers for `segments` from `tree`, or undefined when the tree has nothing there
 * (the caller tries its next layer). A sub-tree is SERIALIZATION_FAILURE; a path below
 * `xds.node` descends into the Node message, as Envoy does (see node.ts).
 */
export function lookupProperty(tree: PropertyMap, segments: readonly string[]): PropertyResult | undefined {
  if (segments.length > 2 && segments[0] === "xds" && segments[1] === "node") {
    const node = findProperty(tree, ["xds", "node"]);
    if (node instanceof Uint8Array) return nodeSubProperty(node, segments.slice(2));
  }
  const node = findProperty(tree, segments);
  if (node === undefined) return undefined;
  if (node instanceof Map) return { status: WasmResult.SerializationFailure };
  return { status: WasmResult.Ok, bytes: node };
}

/** The node at `segments` below `tree`, or undefined. */
export function findProperty(tree: PropertyMap, segments: readonly string[]): PropertyNode | undefined {
  let node: PropertyNode | undefined = tree;
  for (const segment of segments) {
    if (!(node instanceof Map)) return undefined;
    node = node.get(segment);
    if (node === undefined) return undefined;
  }
  return node;
}
