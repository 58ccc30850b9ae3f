// A private copy of a shipped ECDS plugin directory (envoy-configs/<filter>_plugin/), so tests can
// push configuration updates to a running Envoy the way operators do (write a new file, rename it
// into the watched directory) without ever touching the repository's copy.
import { readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { REPO_ROOT, scratchDir } from "./paths.js";

export class EcdsPlugin {
  readonly dir: string;
  private version = 1;

  /** `shippedDir` is relative to the repository root, e.g. envoy-configs/tunnel_port_plugin. */
  constructor(readonly shippedDir: string, readonly file: string) {
    this.dir = scratchDir("ecds-");
    writeFileSync(join(this.dir, file), readFileSync(join(REPO_ROOT, shippedDir, file), "utf8"));
  }

  /** A bootstrap that names the shipped directory, pointed at this copy instead. */
  bootstrap(configText: string): string {
    return configText.replaceAll(this.shippedDir, this.dir);
  }

  /** The plugin configuration (the JSON under `value: |`) as currently deployed. */
  snapshot(): any {
    const text = readFileSync(join(this.dir, this.file), "utf8");
    return JSON.parse(/value: \|\n([\s\S]*)$/.exec(text)?.[1] ?? "");
  }

  /** Replaces the plugin configuration with `configuration` (any text) by an atomic rename. */
  push(configuration: string): void {
    const text = readFileSync(join(this.dir, this.file), "utf8");
    const marker = text.indexOf("value: |");
    const head = text.slice(0, marker + "value: |".length);
    // The block scalar's lines sit two columns right of `value:`.
    const indent = " ".repeat(marker - text.lastIndexOf("\n", marker) - 1 + 2);
    const body = configuration.split("\n").map((line) => `${indent}${line}`).join("\n");
    const next = head.replace(/version_info: "\d+"/, `version_info: "${++this.version}"`) + "\n" + body + "\n";
    const staging = join(this.dir, `.${this.file}.next`);
    writeFileSync(staging, next);
    renameSync(staging, join(this.dir, this.file));
  }

  /** Edits the current snapshot and pushes the result. */
  update(edit: (snapshot: any) => void): void {
    const snapshot = this.snapshot();
    edit(snapshot);
    this.push(JSON.stringify(snapshot, null, 2));
  }
}
