// The client half of the "nothing lost" tests: many concurrent connections with seeded random
// payload sizes in both directions, each half-closed after sending and read to EOF, then checked
// byte for byte (SHA-256) against what the checksum server recorded for the same connection id.
import { createHash } from "node:crypto";
import { connect } from "node:net";
import { HEADER_BYTES, HOLD_FIN_UNTIL_CLIENT_EOF, type ChecksumServer, type PayloadPool } from "./checksum_server.js";

export interface Target {
  host: string;
  port: number;
}

export interface LoadOptions {
  count: number;
  concurrency: number;
  /** Sizes are uniform in [0, maxPayload], drawn from this seed. */
  seed: number;
  maxPayload: number;
  pool: PayloadPool;
  /** Where connection `index` dials (through the capture when localAddress is set). */
  target: (index: number) => Target;
  servers: ChecksumServer[];
  localAddress?: string;
  /** First connection id (ids must be unique per server over its lifetime). */
  firstId?: number;
  timeoutMs?: number;
  /** Bytes asked back at most; default maxPayload (small values make the server half-close first). */
  maxDownload?: number;
  /** When the server half-closes: "after-reply" (as soon as it has sent; it may still be receiving)
   *  or "after-client-eof" (request/response order). Both sides stream at once either way. */
  serverFin?: "after-reply" | "after-client-eof";
}

export interface ConnectionOutcome {
  id: number;
  up: number;
  down: number;
  /** Empty when every byte arrived both ways; otherwise what went wrong. */
  problem: string;
  /** The only problem is that the server got a clean prefix of the upload (no wrong byte, no
   *  error, download complete): the signature of the known HBONE loss (known_loss.ts). */
  uploadTruncatedOnly: boolean;
  /** Name of the server that handled it. */
  server: string;
}

export interface LoadResult {
  seed: number;
  outcomes: ConnectionOutcome[];
  failures: ConnectionOutcome[];
  bytesUp: number;
  bytesDown: number;
  seconds: number;
}

/** mulberry32: a small seeded PRNG, so printed seeds reproduce the same sizes. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface ClientSide {
  downSha: string;
  downBytes: number;
  error: string;
}

/** One connection: header + upload, half-close, read to EOF. Never rejects. */
function oneConnection(target: Target, id: number, upload: Buffer, down: number, holdFin: boolean, timeoutMs: number, localAddress?: string): Promise<ClientSide> {
  return new Promise((done) => {
    const hash = createHash("sha256");
    let downBytes = 0;
    let error = "";
    let sawEnd = false;
    // noDelay: the header and a small upload go out at once instead of waiting out Nagle and a
    // delayed ACK (~40 ms a connection, which made the soak latency-bound).
    const socket = connect({ host: target.host, port: target.port, allowHalfOpen: true, noDelay: true, ...(localAddress ? { localAddress } : {}) });
    const timer = setTimeout(() => {
      error ||= `timeout after ${timeoutMs} ms`;
      socket.destroy();
    }, timeoutMs);
    socket.on("connect", () => {
      const header = Buffer.alloc(HEADER_BYTES);
      header.writeUInt32BE(id, 0);
      header.writeUInt32BE((down | (holdFin ? HOLD_FIN_UNTIL_CLIENT_EOF : 0)) >>> 0, 4);
      socket.write(header);
      socket.end(upload);
    });
    socket.on("data", (chunk: Buffer) => {
      hash.update(chunk);
      downBytes += chunk.length;
    });
    socket.on("end", () => {
      sawEnd = true;
    });
    socket.on("error", (failure: NodeJS.ErrnoException) => {
      error ||= failure.code ?? failure.message;
    });
    socket.on("close", () => {
      clearTimeout(timer);
      if (!error && !sawEnd) error = "closed without EOF";
      done({ downSha: hash.digest("hex"), downBytes, error });
    });
  });
}

/** The server's record for `id`, waiting briefly: the server may see EOF just after the client. */
async function takeRecord(servers: ChecksumServer[], id: number) {
  for (let attempt = 0; attempt < 100; attempt++) {
    for (const server of servers) {
      const record = server.records.get(id);
      if (record) {
        server.records.delete(id);
        return record;
      }
    }
    await new Promise((done) => setTimeout(done, 20));
  }
  return undefined;
}

function compare(upload: Buffer, down: number, client: ClientSide, record: Awaited<ReturnType<typeof takeRecord>>): string {
  if (client.error) return `client: ${client.error} (${client.downBytes}/${down} bytes back)`;
  if (!record) return "server never saw this connection end";
  if (record.error) return `server: ${record.error}`;
  if (record.receivedBytes !== upload.length) return `server received ${record.receivedBytes}/${upload.length} bytes${record.firstMismatch >= 0 ? ` (first wrong byte at ${record.firstMismatch})` : ""}`;
  const upSha = createHash("sha256").update(upload).digest("hex");
  if (record.receivedSha !== upSha) return `upload checksum differs (first wrong byte at ${record.firstMismatch})`;
  if (client.downBytes !== down) return `client received ${client.downBytes}/${down} bytes`;
  if (record.sentBytes !== down) return `server sent ${record.sentBytes}/${down} bytes`;
  if (record.sentSha !== client.downSha) return "download checksum differs";
  return "";
}

export async function runLoad(options: LoadOptions): Promise<LoadResult> {
  const random = seededRandom(options.seed);
  const size = (max: number) => Math.floor(random() * (max + 1));
  const maxDownload = Math.min(options.maxDownload ?? options.maxPayload, options.maxPayload);
  const plan = Array.from({ length: options.count }, (_, index) => ({ index, id: (options.firstId ?? 0) + index, up: size(options.maxPayload), down: size(maxDownload) }));
  const outcomes: ConnectionOutcome[] = new Array(plan.length);
  const started = process.hrtime.bigint();
  let next = 0;
  const worker = async () => {
    while (next < plan.length) {
      const { index, id, up, down } = plan[next++]!;
      const upload = options.pool.slice(id, up, 0);
      const holdFin = options.serverFin === "after-client-eof";
      const client = await oneConnection(options.target(index), id, upload, down, holdFin, options.timeoutMs ?? 30_000, options.localAddress);
      const record = await takeRecord(options.servers, id);
      const problem = compare(upload, down, client, record);
      const uploadTruncatedOnly =
        problem !== "" && record !== undefined && !client.error && !record.error && record.firstMismatch < 0 &&
        record.receivedBytes < upload.length && compare(upload.subarray(0, record.receivedBytes), down, client, record) === "";
      outcomes[index] = { id, up, down, problem, uploadTruncatedOnly, server: record?.server ?? "" };
    }
  };
  await Promise.all(Array.from({ length: Math.min(options.concurrency, plan.length) }, worker));
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const failures = outcomes.filter((outcome) => outcome.problem !== "");
  return {
    seed: options.seed,
    outcomes,
    failures,
    bytesUp: plan.reduce((sum, item) => sum + item.up, 0),
    bytesDown: plan.reduce((sum, item) => sum + item.down, 0),
    seconds,
  };
}

/** A failure message that lets anyone replay the run: seed, sizes and the first problems. */
export function describeFailures(result: LoadResult, limit = 10): string {
  const lines = result.failures.slice(0, limit).map((f) => `  id=${f.id} up=${f.up} down=${f.down} server=${f.server || "?"}: ${f.problem}`);
  return `${result.failures.length}/${result.outcomes.length} connections lost bytes (seed ${result.seed}):\n${lines.join("\n")}`;
}

/** A fresh seed unless NOTHING_LOST_SEED replays one. */
export function chooseSeed(): number {
  const fixed = process.env.NOTHING_LOST_SEED;
  return fixed ? Number(fixed) >>> 0 : (Math.random() * 2 ** 32) >>> 0;
}
