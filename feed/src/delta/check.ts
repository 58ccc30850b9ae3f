// Never publish what a filter would refuse (issue 14), for deltas too: every version is
// decoded and checked here, against the state the filters would hold after applying it,
// before it enters the journal. The rules mirror the filters' decoder (issue 15's format v2,
// assembly/mesh's applyMeshMessage): every read bounds-checked, valid UTF-8, the JSON model's
// content rules (SPIFFE identity required when istio, hostname and locality shapes, SAN
// without ',', ports 1..65535, address families), ids below the header's limits, memberships
// naming a service that is live after the message, one live workload per address and network,
// one service per VIP and network, one service per hostname. The first problem refuses the
// whole message, with one line naming the record and field.
//
// This is a TypeScript mirror written from the contract; the compiled filter's own decoder is
// the authority (at merge the lead adds a check in a shadow VM of the compiled filter, as the
// JSON path does with FilterValidator).
import {
  FAMILY_V4,
  FAMILY_V6,
  FORMAT_VERSION,
  HEADER,
  HEADER_BYTES,
  KIND_DELTA,
  KIND_FULL,
  KIND_NO_CHANGE,
  MAGIC,
  RECORD_SERVICE_REMOVE,
  RECORD_SERVICE_UPSERT,
  RECORD_WORKLOAD_REMOVE,
  RECORD_WORKLOAD_UPSERT,
  REF_ADDRESS,
  REF_HOSTNAME,
  SF_CLUSTER,
  SF_WAYPOINT,
  WF_GATEWAY,
  WF_ISTIO,
  WF_WAYPOINT,
} from "./wire.js";
import { RECORD_WORKLOAD_COMPACT } from "./wire_full.js";

import { isHostname, isLocality, isSpiffeIdentity, MAX_NETWORK_BYTES, SPIFFE_SHAPE } from "./text_rules.js";

const decoder = new TextDecoder("utf-8", { fatal: true });

class Refusal extends Error {}

declare module "node:buffer" {
  interface Buffer {
    latin1Slice(start: number, end: number): string;
    hexSlice(start: number, end: number): string;
  }
}

/** Bounds-checked little-endian reads over one message. */
class Reader {
  pos: number;
  constructor(
    readonly buf: Buffer,
    start: number,
    private where: () => string,
  ) {
    this.pos = start;
  }

  fail(field: string, reason: string): never {
    throw new Refusal(`${this.where()}.${field}: ${reason}`);
  }

  need(n: number, field: string): void {
    if (this.pos + n > this.buf.length) this.fail(field, "truncated");
  }

  u8(field: string): number {
    this.need(1, field);
    return this.buf[this.pos++];
  }

  u16(field: string): number {
    this.need(2, field);
    const v = this.buf.readUInt16LE(this.pos);
    this.pos += 2;
    return v;
  }

  u32(field: string): number {
    this.need(4, field);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }

  str(field: string): string {
    const n = this.u16(field);
    this.need(n, field);
    const buf = this.buf;
    const start = this.pos;
    this.pos += n;
    let ascii = true;
    for (let i = start; i < start + n; i++) {
      if (buf[i] >= 0x80) {
        ascii = false;
        break;
      }
    }
    if (ascii) return buf.latin1Slice(start, start + n);
    try {
      return decoder.decode(buf.subarray(start, start + n));
    } catch {
      return this.fail(field, "not valid UTF-8");
    }
  }

  /** An address as a key: IPv4 as its 32-bit number, IPv6 as hex (distinct from every IPv4 key). */
  address(field: string): string | number {
    const family = this.u8(field);
    const n = family === FAMILY_V4 ? 4 : family === FAMILY_V6 ? 16 : -1;
    if (n < 0) this.fail(field, `address family ${family} (expected 4 or 6)`);
    this.need(n, field);
    const key = n === 4 ? this.buf.readUInt32BE(this.pos) : this.buf.hexSlice(this.pos, this.pos + n);
    this.pos += n;
    return key;
  }

  /** An unsigned LEB128 integer of at most 31 bits, no overlong form (as the filters read it). */
  varint(field: string): number {
    let v = 0;
    for (let i = 0; i < 5; i++) {
      const b = this.u8(field);
      v += (b & 0x7f) * 2 ** (7 * i);
      if (!(b & 0x80)) {
        if (i > 0 && b === 0) this.fail(field, "overlong varint");
        if (v > 0x7fffffff) break;
        return v;
      }
    }
    return this.fail(field, "varint out of range (at most 2^31 - 1)");
  }

  port(field: string): number {
    const p = this.u16(field);
    if (p === 0) this.fail(field, "port 0 (expected 1..65535)");
    return p;
  }

  ref(field: string): void {
    const kind = this.u8(`${field}.kind`);
    if (kind === REF_ADDRESS) this.address(`${field}.address`);
    else if (kind === REF_HOSTNAME) {
      const h = this.str(`${field}.hostname`);
      if (!isHostname(h)) this.fail(`${field}.hostname`, `not a hostname: ${JSON.stringify(h)}`);
    } else this.fail(`${field}.kind`, `${kind} (expected 1 address or 2 hostname)`);
    this.port(`${field}.port`);
  }
}

// ------------------------------------------------------------------ state

interface WorkloadState {
  keys: string[];
}
interface ServiceState {
  hostname: string;
  vipKeys: string[];
}

interface DecodedWorkload {
  record: number;
  id: number;
  removed: boolean;
  keys: string[];
  memberships: number[];
}
interface DecodedService {
  record: number;
  id: number;
  removed: boolean;
  hostname: string;
  vipKeys: string[];
}

export interface CheckedMessage {
  kind: number;
  epoch: number;
  base: number;
  version: number;
  records: number;
  workloads: DecodedWorkload[];
  services: DecodedService[];
}

function u64(buf: Buffer, at: number): number {
  return buf.readUInt32LE(at) + buf.readUInt32LE(at + 4) * 0x1_0000_0000;
}

/**
 * Who else holds `key` after the message: a claim made earlier in this message, or the owner
 * before it unless the message touches (replaces or removes) that owner. Undefined: nobody.
 */
function claimant(inMessage: Map<string, number>, before: Map<string, number> | undefined, touched: Map<number, unknown>, key: string, id: number): number | undefined {
  const now = inMessage.get(key);
  if (now !== undefined && now !== id) return now;
  const old = before?.get(key);
  if (old !== undefined && old !== id && !touched.has(old)) return old;
  return undefined;
}

const TYPE_NAMES: Record<number, string> = { 1: "workload upsert", 2: "workload remove", 3: "service upsert", 4: "service remove", 5: "workload upsert" };

/** A full message's tables (wire_full.ts): texts by index, and how many references. */
interface Tables {
  texts: string[];
  refs: number;
}

/**
 * The state a filter holds after applying the messages checked so far (ids, addresses,
 * VIPs, hostnames: what the after-message rules need), and the check of the next message.
 */
export class WireShadow {
  private workloads = new Map<number, WorkloadState>();
  private services = new Map<number, ServiceState>();
  private addressOwner = new Map<string, number>();
  private vipOwner = new Map<string, number>();
  private hostnameOwner = new Map<string, number>();
  epoch = 0;
  version = 0;
  /** Texts already found valid (identities, localities repeat across workloads); bounded. */
  private readonly validTexts = new Map<(t: string) => boolean, Set<string>>();

  private checkedText(text: string, rule: (t: string) => boolean): boolean {
    let valid = this.validTexts.get(rule);
    if (!valid) this.validTexts.set(rule, (valid = new Set()));
    if (valid.has(text)) return true;
    if (!rule(text)) return false;
    if (valid.size >= 65_536) valid.clear();
    valid.add(text);
    return true;
  }

  /** Checks `message`; returns the one-line refusal, or the decoded message to `commit`. */
  check(message: Buffer): { error: string } | { ok: CheckedMessage } {
    try {
      return { ok: this.decode(message) };
    } catch (error) {
      if (error instanceof Refusal) return { error: error.message };
      throw error;
    }
  }

  private decode(buf: Buffer): CheckedMessage {
    const head = (field: string, reason: string): never => {
      throw new Refusal(`header.${field}: ${reason}`);
    };
    if (buf.length < HEADER_BYTES) head("length", `${buf.length} bytes (at least ${HEADER_BYTES})`);
    if (buf.readUInt32LE(HEADER.magic) !== MAGIC) head("magic", "not a mesh delta message");
    if (buf.readUInt16LE(HEADER.format) !== FORMAT_VERSION) head("format", `version ${buf.readUInt16LE(HEADER.format)} (expected ${FORMAT_VERSION})`);
    const kind = buf.readUInt16LE(HEADER.kind);
    if (kind !== KIND_FULL && kind !== KIND_DELTA && kind !== KIND_NO_CHANGE) head("kind", `${kind} (expected 1, 2 or 3)`);
    const epoch = u64(buf, HEADER.epoch);
    const base = u64(buf, HEADER.base);
    const version = u64(buf, HEADER.version);
    if (epoch === 0) head("epoch", "0");
    if (kind === KIND_DELTA) {
      if (!(version > base)) head("version", `${version} is not after base ${base}`);
      if (epoch !== this.epoch || base !== this.version) head("base", `delta from ${epoch}/${base} does not apply to ${this.epoch}/${this.version}`);
    } else if (base !== 0) head("base", `${base} (expected 0 for kind ${kind})`);
    const wLimit = buf.readUInt32LE(HEADER.workloadIdLimit);
    const sLimit = buf.readUInt32LE(HEADER.serviceIdLimit);
    const count = buf.readUInt32LE(HEADER.recordCount);
    if (buf.readUInt32LE(HEADER.bodyLength) !== buf.length - HEADER_BYTES) head("bodyLength", `${buf.readUInt32LE(HEADER.bodyLength)} (the body has ${buf.length - HEADER_BYTES} bytes)`);
    if (u64(buf, HEADER.reserved) !== 0) head("reserved", "not 0");
    if (kind === KIND_NO_CHANGE && count !== 0) head("recordCount", `${count} (a no-change message has none)`);
    let index = 0;
    let where = "";
    const r = new Reader(buf, HEADER_BYTES, () => where);
    const tables: Tables = { texts: [], refs: 0 };
    if (kind === KIND_FULL) {
      where = "tables";
      for (let n = r.u32("textCount"), i = 0; i < n; i++) tables.texts.push(r.str(`texts[${i}]`));
      tables.refs = r.u32("refCount");
      for (let i = 0; i < tables.refs; i++) r.ref(`refs[${i}]`);
    }
    const workloads: DecodedWorkload[] = [];
    const services: DecodedService[] = [];
    for (index = 0; index < count; index++) {
      where = `record ${index}`;
      const type = r.u8("type");
      const id = r.u32("id");
      const name = TYPE_NAMES[type];
      if (!name) r.fail("type", `${type} (expected 1..5)`);
      where = `record ${index} (${name} id ${id})`;
      if (type === RECORD_WORKLOAD_COMPACT && kind !== KIND_FULL) r.fail("type", "5 (compact workload upsert) is only valid in a full message");
      const isWorkload = type === RECORD_WORKLOAD_UPSERT || type === RECORD_WORKLOAD_REMOVE || type === RECORD_WORKLOAD_COMPACT;
      if (id >= (isWorkload ? wLimit : sLimit)) r.fail("id", `${id} is not below the ${isWorkload ? "workload" : "service"} id limit ${isWorkload ? wLimit : sLimit}`);
      if (kind === KIND_FULL && (type === RECORD_WORKLOAD_REMOVE || type === RECORD_SERVICE_REMOVE)) r.fail("type", "a full message has no removals");
      if (type === RECORD_WORKLOAD_REMOVE) workloads.push({ record: index, id, removed: true, keys: [], memberships: [] });
      else if (type === RECORD_SERVICE_REMOVE) services.push({ record: index, id, removed: true, hostname: "", vipKeys: [] });
      else if (type === RECORD_WORKLOAD_UPSERT || type === RECORD_WORKLOAD_COMPACT) workloads.push(this.workload(r, index, id, type === RECORD_WORKLOAD_COMPACT ? tables : undefined));
      else services.push(this.service(r, index, id));
    }
    where = "body";
    if (r.pos !== buf.length) r.fail("length", `${buf.length - r.pos} bytes after the last record`);
    const m: CheckedMessage = { kind, epoch, base, version, records: count, workloads, services };
    this.after(m);
    return m;
  }

  private workload(r: Reader, record: number, id: number, tables?: Tables): DecodedWorkload {
    const flags = r.u8("flags");
    if (flags & ~0x0f) r.fail("flags", `unknown bits 0x${(flags & ~0x0f).toString(16)}`);
    // A compact record names its texts and references by table index.
    const text = (field: string): string => {
      if (!tables) return r.str(field);
      const i = r.varint(field);
      if (i >= tables.texts.length) r.fail(field, `text ${i} is not in the table of ${tables.texts.length}`);
      return tables.texts[i];
    };
    const ref = (field: string): void => {
      if (!tables) return r.ref(field);
      const i = r.varint(field);
      if (i >= tables.refs) r.fail(field, `reference ${i} is not in the table of ${tables.refs}`);
    };
    const network = text("network");
    if (network.length > MAX_NETWORK_BYTES / 3 && Buffer.byteLength(network) > MAX_NETWORK_BYTES) r.fail("network", `longer than ${MAX_NETWORK_BYTES} bytes`);
    const identity = text("identity");
    if (identity === "" && flags & WF_ISTIO) r.fail("identity", 'required when tlsMode is "istio"');
    if (identity !== "" && !this.checkedText(identity, isSpiffeIdentity)) r.fail("identity", `not a SPIFFE identity (expected ${SPIFFE_SHAPE}): ${JSON.stringify(identity)}`);
    const locality = text("locality");
    if (!this.checkedText(locality, isLocality)) r.fail("locality", `not a locality (expected region[/zone[/subzone]]): ${JSON.stringify(locality)}`);
    if (flags & WF_WAYPOINT) ref("waypoint");
    if (flags & WF_GATEWAY) ref("networkGateway");
    const n = r.u8("addresses");
    if (n === 0 && !(flags & WF_GATEWAY)) r.fail("addresses", "none, and no network gateway");
    const keys: string[] = [];
    for (let i = 0; i < n; i++) {
      const key = `${network}|${r.address("addresses")}`;
      if (keys.includes(key)) r.fail("addresses", "the same address twice");
      keys.push(key);
    }
    const members = r.u16("memberships");
    const memberships: number[] = [];
    for (let i = 0; i < members; i++) {
      const service = r.u32("memberships.service");
      if (memberships.includes(service)) r.fail("memberships", `service ${service} twice`);
      memberships.push(service);
      const overrides = r.u8("memberships.overrides");
      for (let k = 0; k < overrides; k++) {
        r.port("memberships.overrides.port");
        r.port("memberships.overrides.target");
      }
    }
    return { record, id, removed: false, keys, memberships };
  }

  private service(r: Reader, record: number, id: number): DecodedService {
    const hostname = r.str("hostname");
    if (!isHostname(hostname)) r.fail("hostname", `not a hostname: ${JSON.stringify(hostname)}`);
    const flags = r.u8("flags");
    if (flags & ~0x0f) r.fail("flags", `unknown bits 0x${(flags & ~0x0f).toString(16)}`);
    if (flags & SF_CLUSTER && r.str("cluster") === "") r.fail("cluster", "must not be empty");
    const prefs = r.u32("lbPrefs");
    const seen = new Set<number>();
    for (let i = 0, ended = false; i < 4; i++) {
      const scope = (prefs >>> (8 * i)) & 0xff;
      if (scope === 0) {
        ended = true;
        continue;
      }
      if (ended || scope > 4 || seen.has(scope)) r.fail("lbPrefs", `0x${prefs.toString(16)} is not a list of distinct scopes 1..4`);
      seen.add(scope);
    }
    const ports = r.u16("ports");
    const portSeen = new Set<number>();
    for (let i = 0; i < ports; i++) {
      const p = r.port("ports.port");
      if (portSeen.has(p)) r.fail("ports", `port ${p} twice`);
      portSeen.add(p);
      r.port("ports.target");
    }
    const vips = r.u16("vips");
    const vipKeys: string[] = [];
    for (let i = 0; i < vips; i++) {
      const network = r.str("vips.network");
      const key = `${network}|${r.address("vips.address")}`;
      if (vipKeys.includes(key)) r.fail("vips", "the same VIP twice");
      vipKeys.push(key);
    }
    if (flags & SF_WAYPOINT) r.ref("waypoint");
    const sans = r.u16("subjectAltNames");
    for (let i = 0; i < sans; i++) {
      const san = r.str("subjectAltNames");
      if (san === "") r.fail("subjectAltNames", "must not be empty");
      if (san.includes(",")) r.fail("subjectAltNames", "must not contain ','");
    }
    return { record, id, removed: false, hostname, vipKeys };
  }

  /** The rules on the state after the message (nothing is changed here). */
  private after(m: CheckedMessage): void {
    const full = m.kind === KIND_FULL;
    const fail = (record: number, type: number, id: number, field: string, reason: string): never => {
      throw new Refusal(`record ${record} (${TYPE_NAMES[type]} id ${id}).${field}: ${reason}`);
    };
    // Services after the message.
    const touchedServices = new Map<number, DecodedService>();
    for (const s of m.services) touchedServices.set(s.id, s);
    const serviceLive = (id: number) => {
      const t = touchedServices.get(id);
      if (t) return !t.removed;
      return !full && this.services.has(id);
    };
    const hostClaims = new Map<string, number>();
    const vipClaims = new Map<string, number>();
    for (const s of touchedServices.values()) {
      if (s.removed) continue;
      const other = claimant(hostClaims, full ? undefined : this.hostnameOwner, touchedServices, s.hostname, s.id);
      if (other !== undefined) fail(s.record, RECORD_SERVICE_UPSERT, s.id, "hostname", `${s.hostname} is already service ${other}'s`);
      hostClaims.set(s.hostname, s.id);
      for (const key of s.vipKeys) {
        const owner = claimant(vipClaims, full ? undefined : this.vipOwner, touchedServices, key, s.id);
        if (owner !== undefined) fail(s.record, RECORD_SERVICE_UPSERT, s.id, "vips", `VIP ${key} is already service ${owner}'s on that network`);
        vipClaims.set(key, s.id);
      }
    }
    const touchedWorkloads = new Map<number, DecodedWorkload>();
    for (const w of m.workloads) touchedWorkloads.set(w.id, w);
    const addressClaims = new Map<string, number>();
    for (const w of touchedWorkloads.values()) {
      if (w.removed) continue;
      for (const key of w.keys) {
        const owner = claimant(addressClaims, full ? undefined : this.addressOwner, touchedWorkloads, key, w.id);
        if (owner !== undefined) fail(w.record, RECORD_WORKLOAD_UPSERT, w.id, "addresses", `address ${key} is already workload ${owner}'s on that network`);
        addressClaims.set(key, w.id);
      }
      for (const s of w.memberships) if (!serviceLive(s)) fail(w.record, RECORD_WORKLOAD_UPSERT, w.id, "memberships", `service ${s} is not live after this message`);
    }
    // A removed service drops its memberships; a workload the message does not touch that is a
    // member of it is fine (the filter drops that membership), so nothing else to check.
  }

  /** Applies a checked message to the shadow state. */
  commit(m: CheckedMessage): void {
    if (m.kind === KIND_NO_CHANGE) return;
    if (m.kind === KIND_FULL) {
      this.workloads.clear();
      this.services.clear();
      this.addressOwner.clear();
      this.vipOwner.clear();
      this.hostnameOwner.clear();
    }
    for (const s of m.services) {
      const old = this.services.get(s.id);
      if (old) {
        if (this.hostnameOwner.get(old.hostname) === s.id) this.hostnameOwner.delete(old.hostname);
        for (const k of old.vipKeys) if (this.vipOwner.get(k) === s.id) this.vipOwner.delete(k);
        this.services.delete(s.id);
      }
    }
    for (const s of m.services) {
      if (s.removed) continue;
      this.services.set(s.id, { hostname: s.hostname, vipKeys: s.vipKeys });
      this.hostnameOwner.set(s.hostname, s.id);
      for (const k of s.vipKeys) this.vipOwner.set(k, s.id);
    }
    for (const w of m.workloads) {
      const old = this.workloads.get(w.id);
      if (old) {
        for (const k of old.keys) if (this.addressOwner.get(k) === w.id) this.addressOwner.delete(k);
        this.workloads.delete(w.id);
      }
    }
    for (const w of m.workloads) {
      if (w.removed) continue;
      this.workloads.set(w.id, { keys: w.keys });
      for (const k of w.keys) this.addressOwner.set(k, w.id);
    }
    this.epoch = m.epoch;
    this.version = m.version;
  }
}
