// A cluster read from files instead of an API server: one YAML file, or a directory of them,
// holding Pods, Services, EndpointSlices, Namespaces, Nodes, Gateways and GatewayClasses as
// `kubectl get -o yaml` shows them (status included: a pod's IP is what the file says). It fills
// the same ClusterObjects an API-server watch fills, so the rest of the feed cannot tell them
// apart: an operator can try the feed, or explain a mesh, without a cluster.
//
// Changes are followed live: fs.watch on the directory (the file's directory for a single file,
// so an editor's or `mv`'s atomic replace is seen), a short debounce, then a rescan. A rescan
// re-reads only files whose inode, size or times changed, so it is cheap enough to run on every
// event and every few seconds as a backstop for events fs.watch can miss. A file that cannot be
// read, parsed or checked is refused with one line naming it; the objects it held before stay.
import { closeSync, existsSync, openSync, readdirSync, readSync, statSync, watch, type FSWatcher } from "node:fs";
import { basename, dirname, join } from "node:path";
import type { ClusterObjects, Kind } from "./cluster_objects.js";
import { Debouncer } from "./debounce.js";
import { readObjects, type FileObject } from "./file_objects.js";
import type { WatchHooks } from "./watch.js";

/** Largest file read (bytes); a larger one is refused unread. 16 MiB is ~50,000 pods as `kubectl get -o yaml` writes them. */
export const FILE_MAX_BYTES = 16 << 20;
/** fs.watch events come in bursts (a write is several); one rescan per burst. */
export const FILE_DEBOUNCE = { quietMs: 20, maxMs: 200 };
/** A rescan this often even without events (a missed event, a directory recreated). */
export const FILE_RESCAN_MS = 5000;
/** Which names in a directory are read: YAML or JSON, not hidden (an atomic write's temporary file usually is). */
const READ_NAME = /^[^.].*\.(ya?ml|json)$/i;

export interface FileSourceHooks extends WatchHooks {
  /** A file or document refused (reason: too_large, unreadable, yaml, object, duplicate, unknown_kind). */
  refused(clusterId: string, reason: string): void;
}

export interface FileSourceOptions {
  maxBytes?: number;
  rescanMs?: number;
}

interface FileState {
  /** inode, size, mtime and ctime at the last read attempt: unchanged means not read again. */
  stamp: string;
  /** The objects in force from this file: the last read that was accepted. */
  objects: FileEntry[];
}

/**
 * An object of a file as a rescan compares it: its id and JSON made once, when the file is read.
 * A rescan then decides only the ids of the files that changed (`holders`), so one changed file
 * costs its own objects, not a pass over every object of every file (20,000 pods in files and
 * four changes a second made ~50 MB/s of garbage that way).
 */
interface FileEntry {
  id: string;
  kind: Kind;
  key: string;
  json: string;
  file: string;
}

/** An object as held in ClusterObjects, with the JSON it was compared by. */
interface Held {
  kind: Kind;
  json: string;
  object: FileObject["object"];
}

export class FileSource {
  private readonly files = new Map<string, FileState>();
  private readonly held = new Map<string, Held>();
  /** Every file's entries by id (usually one: more when an object is in several files). */
  private readonly holders = new Map<string, FileEntry[]>();
  private readonly debouncer: Debouncer;
  private readonly maxBytes: number;
  private readonly rescanMs: number;
  private watcher: FSWatcher | undefined;
  /** Inode of the watched directory: a directory removed and created again needs a new watch. */
  private watchedIno = -1;
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  /** The last "cannot list" line, logged once until it changes. */
  private listError: string | undefined;
  /** Whether `path` is a directory (else one file). */
  private directory = false;

  constructor(
    readonly objects: ClusterObjects,
    readonly path: string,
    private readonly hooks: FileSourceHooks,
    options: FileSourceOptions = {},
  ) {
    this.maxBytes = options.maxBytes ?? FILE_MAX_BYTES;
    this.rescanMs = options.rescanMs ?? FILE_RESCAN_MS;
    this.debouncer = new Debouncer(FILE_DEBOUNCE, async () => this.scan());
  }

  /** Reads everything once (the initial sync), then follows changes. A missing path stops the start. */
  async start(): Promise<void> {
    const id = this.objects.clusterId;
    let st;
    try {
      st = statSync(this.path);
    } catch (error) {
      throw new Error(`cluster ${id}: files: cannot read ${this.path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message})`);
    }
    this.directory = st.isDirectory();
    this.scan();
    this.hooks.log("info", `cluster ${id}: files read from ${this.path} (${JSON.stringify(this.objects.count())})`);
    this.hooks.synced(id);
    const tick = () => {
      this.timer = setTimeout(() => {
        if (this.stopped) return;
        this.scan();
        tick();
      }, this.rescanMs);
      this.timer.unref();
    };
    tick();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.debouncer.stop();
    if (this.timer) clearTimeout(this.timer);
    this.watcher?.close();
    this.watcher = undefined;
  }

  /** The directory fs.watch follows. */
  private watchedDir(): string {
    return this.directory ? this.path : dirname(this.path);
  }

  /** (Re)creates the directory watch when there is none or the directory was replaced. */
  private ensureWatch(): void {
    if (this.stopped) return;
    const dir = this.watchedDir();
    let ino: number;
    try {
      ino = statSync(dir).ino;
    } catch {
      return; // gone: the periodic rescan tries again
    }
    if (this.watcher && ino === this.watchedIno) return;
    this.watcher?.close();
    try {
      const only = this.directory ? undefined : basename(this.path);
      this.watcher = watch(dir, (_event, name) => {
        if (only === undefined || name === null || name === only) this.debouncer.poke();
      });
      this.watcher.on("error", () => {
        // The directory went away (or the watch broke): drop it; the rescan re-creates it.
        this.watcher?.close();
        this.watcher = undefined;
      });
      this.watchedIno = ino;
    } catch (error) {
      this.watcher = undefined;
      this.hooks.log("warn", `cluster ${this.objects.clusterId}: cannot watch ${dir} (${(error as Error).message}); rescanning every ${this.rescanMs} ms`);
    }
  }

  /** The files to read now, sorted; undefined when the directory cannot be listed (everything stays). */
  private list(): string[] | undefined {
    if (!this.directory) return existsSync(this.path) ? [this.path] : [];
    try {
      return readdirSync(this.path, { withFileTypes: true })
        .filter((e) => (e.isFile() || e.isSymbolicLink()) && READ_NAME.test(e.name))
        .map((e) => join(this.path, e.name))
        .sort();
    } catch (error) {
      const message = `cluster ${this.objects.clusterId}: cannot list ${this.path} (${(error as NodeJS.ErrnoException).code ?? (error as Error).message}); the objects last read stay`;
      if (message !== this.listError) {
        this.hooks.log("warn", message);
        this.hooks.refused(this.objects.clusterId, "unreadable");
      }
      this.listError = message;
      return undefined;
    }
  }

  private refuse(file: string, stamp: string, reason: string, why: string): void {
    const previous = this.files.get(file);
    // The stamp is kept so the same bad content is refused (and counted) once, not per rescan.
    this.files.set(file, { stamp, objects: previous?.objects ?? [] });
    const kept = previous && previous.objects.length > 0 ? `its ${previous.objects.length} objects read before stay` : "nothing from it is in force";
    this.hooks.log("warn", `cluster ${this.objects.clusterId}: ${file}: ${why}; refused, ${kept}`);
    this.hooks.refused(this.objects.clusterId, reason);
  }

  /**
   * Puts `objects` in force for `file` (undefined: the file is gone), keeping `holders` in step;
   * the ids it had and has are added to `touched`, the ones whose object may have changed.
   */
  private replaceFile(file: string, next: FileState | undefined, touched: Set<string>): void {
    for (const e of this.files.get(file)?.objects ?? []) {
      touched.add(e.id);
      const list = (this.holders.get(e.id) ?? []).filter((h) => h !== e);
      if (list.length > 0) this.holders.set(e.id, list);
      else this.holders.delete(e.id);
    }
    if (!next) {
      this.files.delete(file);
      return;
    }
    this.files.set(file, next);
    for (const e of next.objects) {
      touched.add(e.id);
      const list = this.holders.get(e.id);
      if (list) list.push(e);
      else this.holders.set(e.id, [e]);
    }
  }

  /** Reads one file if it changed since its last read; its ids go into `touched` when its objects may have changed. */
  private readFile(file: string, touched: Set<string>): void {
    let st;
    try {
      st = statSync(file);
    } catch {
      return this.replaceFile(file, undefined, touched); // removed between the listing and now
    }
    if (!st.isFile()) return this.replaceFile(file, undefined, touched);
    const stamp = `${st.ino}:${st.size}:${st.mtimeMs}:${st.ctimeMs}`;
    if (this.files.get(file)?.stamp === stamp) return;
    if (st.size > this.maxBytes) {
      this.refuse(file, stamp, "too_large", `${st.size} bytes, over the ${this.maxBytes}-byte cap (not read)`);
      return;
    }
    let text: string | undefined;
    try {
      text = this.readSized(file, st.size);
    } catch (error) {
      this.refuse(file, stamp, "unreadable", (error as Error).message);
      return;
    }
    if (text === undefined) {
      // It grew while read (a writer still at work): read again after its next event or the
      // periodic rescan; nothing recorded, the objects in force stay meanwhile.
      this.debouncer.poke();
      return;
    }
    const read = readObjects(text);
    if (!read.ok) {
      this.refuse(file, stamp, read.reason, read.error);
      return;
    }
    for (const line of read.skipped) {
      this.hooks.log("warn", `cluster ${this.objects.clusterId}: ${file}: ${line}`);
      this.hooks.refused(this.objects.clusterId, "unknown_kind");
    }
    const objects = read.objects.map((o) => ({ id: `${o.kind}/${o.key}`, kind: o.kind, key: o.key, json: JSON.stringify(o.object), file }));
    this.replaceFile(file, { stamp, objects }, touched);
  }

  /**
   * The file's text, read with a buffer of its size as stat gave it (at most the cap) plus one
   * byte; undefined when it grew past that size since (it is then read again later).
   */
  private readSized(file: string, size: number): string | undefined {
    const fd = openSync(file, "r");
    try {
      const buffer = Buffer.alloc(Math.min(size, this.maxBytes) + 1);
      let n = 0;
      for (let got = 1; got > 0 && n < buffer.length; n += got) got = readSync(fd, buffer, n, buffer.length - n, n);
      if (n > size) return undefined;
      try {
        return new TextDecoder("utf-8", { fatal: true }).decode(buffer.subarray(0, n));
      } catch {
        throw new Error("not valid UTF-8");
      }
    } catch (error) {
      const code = (error as NodeJS.ErrnoException).code;
      throw code ? new Error(`cannot read (${code})`) : error;
    } finally {
      closeSync(fd);
    }
  }

  /** Reads what changed and brings ClusterObjects to exactly the objects of the files in force. */
  private scan(): void {
    if (this.stopped) return;
    this.ensureWatch();
    const files = this.list();
    if (files === undefined) return;
    this.listError = undefined;
    const touched = new Set<string>();
    const present = new Set(files);
    for (const f of [...this.files.keys()]) if (!present.has(f)) this.replaceFile(f, undefined, touched);
    for (const f of files) this.readFile(f, touched);
    if (touched.size === 0) return;
    // The object in force for each touched id: the first file by name that has it.
    let changed = false;
    const upserts: FileEntry[] = [];
    for (const id of touched) {
      const list = this.holders.get(id) ?? [];
      let winner: FileEntry | undefined;
      for (const e of list) if (!winner || e.file < winner.file) winner = e;
      for (const e of list) {
        if (e === winner || !winner) continue;
        this.hooks.log("warn", `cluster ${this.objects.clusterId}: ${e.file}: ${e.kind} ${e.key} is also in ${winner.file}; this copy is ignored`);
        this.hooks.refused(this.objects.clusterId, "duplicate");
      }
      const h = this.held.get(id);
      if (winner) {
        if (h?.json !== winner.json) upserts.push(winner);
      } else if (h) {
        this.objects.remove(h.kind, h.object);
        this.held.delete(id);
        changed = true;
      }
    }
    for (const w of upserts) {
      // ClusterObjects keeps a copy of its own (already stripped by file_objects.ts as the watch
      // strips), never the file's object; a change only to fields the model never reads is none.
      const object = JSON.parse(w.json) as FileObject["object"];
      this.objects.upsert(w.kind, object);
      this.held.set(w.id, { kind: w.kind, json: w.json, object });
      changed = true;
    }
    if (changed) this.hooks.changed(this.objects.clusterId);
  }
}
