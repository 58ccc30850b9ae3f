// Unit tests of the mesh feed channel's pure parts: the 56-byte message header check
// (assembly/runtime/feed_message.ts) and the meshFeed configuration object (feed_config.ts).
// The client's state machine runs in the host: tests/host/feed_client.test.ts.
import { ConfigReader, parseJsonString } from "../json";
import { readFeedConfig } from "../runtime/feed_config";
import { FeedHeader, isMessageContentType, readFeedHeader } from "../runtime/feed_message";

function message(kind: u16, epoch: u64, base: u64, version: u64, body: i32, declared: i32 = body): ArrayBuffer {
  const out = new ArrayBuffer(56 + body);
  const at = changetype<usize>(out);
  store<u32>(at, 0x3148534d);
  store<u16>(at + 4, 2);
  store<u16>(at + 6, kind);
  store<u64>(at + 8, epoch);
  store<u64>(at + 16, base);
  store<u64>(at + 24, version);
  store<u32>(at + 44, <u32>declared);
  return out;
}

function headerError(data: ArrayBuffer): string {
  return readFeedHeader(data, new FeedHeader()).error;
}

describe("feed message header", () => {
  it("reads a full, a delta and a no-change header", () => {
    const full = readFeedHeader(message(1, 7, 0, 3, 10), new FeedHeader());
    expect(full.error).toBe("");
    expect(full.kind).toBe(1);
    expect(full.epoch).toBe(7);
    expect(full.version).toBe(3);
    const delta = readFeedHeader(message(2, 7, 3, 5, 0), new FeedHeader());
    expect(delta.error).toBe("");
    expect(delta.base).toBe(3);
    expect(readFeedHeader(message(3, 7, 0, 5, 0), new FeedHeader()).kind).toBe(3);
  });

  it("refuses every malformed header with one line naming the field, without reading past the end", () => {
    expect(headerError(new ArrayBuffer(55))).toBe("message of 55 bytes is shorter than the 56-byte header");
    const magic = message(1, 7, 0, 3, 0);
    store<u8>(changetype<usize>(magic), 0);
    expect(headerError(magic)).toBe("header.magic: not a mesh feed message");
    const format = message(1, 7, 0, 3, 0);
    store<u16>(changetype<usize>(format) + 4, 1);
    expect(headerError(format)).toBe("header.formatVersion: 1 is not supported (this build reads 3 and 2)");
    expect(headerError(message(4, 7, 0, 3, 0))).toBe("header.kind: 4 is none of 1 (full), 2 (delta), 3 (no change)");
    expect(headerError(message(1, 0, 0, 3, 0))).toBe("header.epoch: must not be 0");
    expect(headerError(message(1, 7, 0, 3, 8, 9))).toBe("header.bodyLength: 9 but the message has 8 bytes after the header");
    expect(headerError(message(2, 7, 5, 5, 0))).toBe("header.version: a delta must end above its base version");
    expect(headerError(message(1, 7, 2, 3, 0))).toBe("header.baseVersion: must be 0 for a full or no-change message");
    const reserved = message(1, 7, 0, 3, 0);
    store<u8>(changetype<usize>(reserved) + 50, 1);
    expect(headerError(reserved)).toBe("header.reserved: must be 0");
  });

  it("format 3: the digest field is read, kinds 4 (repair) and 5 (ask for buckets) exist, a trailer may follow the body", () => {
    const v3 = (kind: u16, body: i32, declared: i32): ArrayBuffer => {
      const m = message(kind, 7, 0, 3, body, declared);
      store<u16>(changetype<usize>(m) + 4, 3);
      store<u64>(changetype<usize>(m) + 48, 0x1234);
      return m;
    };
    const h = readFeedHeader(v3(4, 16, 4), new FeedHeader());
    expect(h.error).toBe("");
    expect(h.format).toBe(3);
    expect(h.digest).toBe(0x1234);
    expect(h.bodyEnd).toBe(60);
    expect(headerError(v3(5, 0, 0))).toBe("");
    expect(headerError(v3(6, 0, 0))).toBe("header.kind: 6 is none of 1 (full), 2 (delta), 3 (no change), 4 (repair), 5 (ask for buckets)");
    expect(headerError(v3(1, 8, 9))).toBe("header.bodyLength: 9 but the message has 8 bytes after the header");
    // Format 2 has neither the new kinds nor a trailer.
    expect(headerError(message(5, 7, 0, 3, 0))).toBe("header.kind: 5 is none of 1 (full), 2 (delta), 3 (no change)");
    expect(headerError(message(1, 7, 0, 3, 8, 4))).toBe("header.bodyLength: 4 but the message has 8 bytes after the header");
  });
});

describe("feed message content type", () => {
  it("takes the media type in any case, with or without parameters, and nothing else", () => {
    expect(isMessageContentType("application/x-mesh-delta")).toBe(true);
    expect(isMessageContentType("Application/X-Mesh-Delta")).toBe(true);
    expect(isMessageContentType("application/x-mesh-delta; v=1")).toBe(true);
    expect(isMessageContentType("application/x-mesh-deltas")).toBe(false);
    expect(isMessageContentType("application/x-mesh")).toBe(false);
    expect(isMessageContentType("text/html")).toBe(false);
    expect(isMessageContentType("")).toBe(false);
  });
});

function feedError(json: string): string {
  const reader = new ConfigReader();
  const feed = readFeedConfig(reader, parseJsonString(json).value);
  if (reader.failed()) return reader.error();
  return feed === null ? "<absent>" : "<ok " + feed.cluster + " " + feed.authority + " " + feed.path + " " + feed.waitSeconds.toString() + ">";
}

function gateSettings(json: string): string {
  const reader = new ConfigReader();
  const feed = readFeedConfig(reader, parseJsonString(json).value);
  if (reader.failed()) return reader.error();
  if (feed === null) return "<absent>";
  return feed.startupWaitMs.toString() + " " + feed.maxWaitingConnections.toString() + " " + (feed.noModelPassthrough ? "passthrough" : "close");
}

describe("meshFeed configuration", () => {
  it("is optional, and defaults authority, path and waitSeconds", () => {
    expect(feedError(`{}`)).toBe("<absent>");
    expect(feedError(`{"meshFeed": {"cluster": "mesh_feed", "target": "node-1"}}`)).toBe("<ok mesh_feed mesh_feed /delta/node-1 25>");
    expect(feedError(`{"meshFeed": {"cluster": "c", "target": "t", "authority": "feed:80", "path": "/v1/t", "waitSeconds": 300}}`)).toBe("<ok c feed:80 /v1/t 300>");
  });

  it("waits 5 s for a first model, holds up to 1024 connections, and closes without one by default", () => {
    expect(gateSettings(`{"meshFeed": {"cluster": "c", "target": "t"}}`)).toBe("5000 1024 close");
    expect(gateSettings(`{"meshFeed": {"cluster": "c", "target": "t", "startupWaitMs": 0, "maxWaitingConnections": 7, "noModelPolicy": "passthrough"}}`)).toBe("0 7 passthrough");
  });

  it("refuses a bad field with one line naming it", () => {
    expect(feedError(`{"meshFeed": 1}`)).toBe("meshFeed: expected an object");
    expect(feedError(`{"meshFeed": {"target": "t"}}`)).toBe("meshFeed.cluster: missing required field");
    expect(feedError(`{"meshFeed": {"cluster": "", "target": "t"}}`)).toBe("meshFeed.cluster: expected an Envoy cluster name (1-253 visible ASCII characters)");
    expect(feedError(`{"meshFeed": {"cluster": "c", "target": "t", "waitSeconds": 301}}`)).toBe("meshFeed.waitSeconds: expected an integer in [1, 300]");
    expect(feedError(`{"meshFeed": {"cluster": "c", "target": "a b"}}`)).toBe("meshFeed.target: expected 1-253 of A-Z a-z 0-9 - . _ ~ (one URL path segment)");
    expect(feedError(`{"meshFeed": {"cluster": "c", "target": "t", "path": "x"}}`)).toBe("meshFeed.path: expected an absolute path without query or fragment (the client adds ?epoch=&version=&wait=)");
    expect(gateSettings(`{"meshFeed": {"cluster": "c", "target": "t", "noModelPolicy": "open"}}`)).toBe("meshFeed.noModelPolicy: expected one of: close, passthrough");
    expect(gateSettings(`{"meshFeed": {"cluster": "c", "target": "t", "startupWaitMs": 1.5}}`)).toBe("meshFeed.startupWaitMs: expected an integer in [0, 60000]");
    expect(gateSettings(`{"meshFeed": {"cluster": "c", "target": "t", "maxWaitingConnections": 65537}}`)).toBe("meshFeed.maxWaitingConnections: expected an integer in [0, 65536]");
    expect(feedError(`{"meshFeed": {"cluster": "c", "target": "t", "wait": 1}}`)).toBe("meshFeed.wait: unknown field (known: cluster, authority, target, path, waitSeconds, startupWaitMs, maxWaitingConnections, noModelPolicy)");
  });
});
