// The channel's TLS material from files: the feed's certificate chain, its key and the mesh's
// trust root(s), re-read when any of them changes so that a rotated certificate (istio-agent,
// cert-manager, a Secret volume swapping its `..data` link) is served without a restart.
// Checked by content every `reloadMs` rather than by file events: a Secret volume replaces a
// symbolic link, which inotify on the old file never reports. A set that does not load (a key
// written before its certificate, a truncated file) is refused with one line and counted, and
// the previous set stays in force until a good one arrives.
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import { createSecureContext, type SecureContextOptions } from "node:tls";

export interface TlsFilePaths {
  certFile: string;
  keyFile: string;
  caFile: string;
}

export interface TlsFileEvents {
  /** A new, loadable set (also the first one). */
  loaded(options: SecureContextOptions): void;
  /** A changed set that does not load: the previous stays. */
  refused(reason: string): void;
}

function read(paths: TlsFilePaths): { options: SecureContextOptions; digest: string } {
  const cert = readFileSync(paths.certFile);
  const key = readFileSync(paths.keyFile);
  const ca = readFileSync(paths.caFile);
  const digest = createHash("sha256").update(cert).update("\0").update(key).update("\0").update(ca).digest("hex");
  return { options: { cert, key, ca }, digest };
}

export class TlsFiles {
  private digest = "";
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly paths: TlsFilePaths,
    private readonly events: TlsFileEvents,
  ) {}

  /** The first set: a feed whose own certificate does not load does not start (throws one line). */
  load(): SecureContextOptions {
    const { options, digest } = read(this.paths);
    try {
      createSecureContext(options);
    } catch (error) {
      throw new Error(`channel: certFile/keyFile/caFile do not load: ${(error as Error).message}`);
    }
    this.digest = digest;
    return options;
  }

  /** Checks the files every `everyMs` from now on. */
  watch(everyMs: number): void {
    this.timer = setInterval(() => this.check(), everyMs);
    this.timer.unref();
  }

  /** Re-reads the files; hands a changed set that loads to `loaded`. */
  check(): void {
    let next: { options: SecureContextOptions; digest: string };
    try {
      next = read(this.paths);
    } catch (error) {
      this.refusedOnce(`cannot read: ${(error as Error).message}`);
      return;
    }
    if (next.digest === this.digest) return;
    try {
      createSecureContext(next.options);
    } catch (error) {
      this.refusedOnce(`the new files do not load (${(error as Error).message})`, next.digest);
      return;
    }
    this.digest = next.digest;
    this.lastRefused = "";
    this.events.loaded(next.options);
  }

  /** One report per bad state, not one per check (a half-written rotation is seen every tick). */
  private lastRefused = "";
  private refusedOnce(reason: string, digest = reason): void {
    if (digest === this.lastRefused) return;
    this.lastRefused = digest;
    this.events.refused(reason);
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = undefined;
  }
}
