// Delivery (a): the ECDS file a plain Envoy watches (envoy-configs/<filter>_ecds.yaml with
// path_config_source + watched_directory). The target's template is an ECDS file in the shipped
// format (a DiscoveryResponse with one TypedExtensionConfig wrapping the Wasm filter); the feed
// replaces its plugin configuration and version_info and writes the result next to the watched
// file, then renames it over: Envoy's directory watch sees one atomic move, never a half file.
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { Document, parseDocument, Scalar } from "yaml";

export class EcdsFileTarget {
  private readonly template: Document;

  /** `file` is the watched file; `templateFile` (default: `file` as it is now) gives everything but the configuration. */
  constructor(readonly file: string, templateFile?: string) {
    this.template = parseDocument(readFileSync(templateFile ?? file, "utf8"));
    const value = this.template.getIn(["resources", 0, "typed_config", "config", "configuration", "value"], true);
    if (value === undefined) {
      throw new Error(`${templateFile ?? file}: not an ECDS file with resources[0].typed_config.config.configuration.value (the shipped *_plugin/*.yaml format)`);
    }
  }

  /**
   * sha256 of the configuration the watched file holds now (undefined: no file, or not one this
   * template's shape): a new leader compares it before writing (deliver/pusher.ts).
   */
  heldDigest(): string | undefined {
    if (!existsSync(this.file)) return undefined;
    const value = parseDocument(readFileSync(this.file, "utf8")).getIn(["resources", 0, "typed_config", "config", "configuration", "value"]);
    return typeof value === "string" ? createHash("sha256").update(value).digest("hex") : undefined;
  }

  /** Writes `configuration` as version `version`; returns the bytes written. */
  write(version: string, configuration: string): number {
    const doc = this.template.clone();
    doc.set("version_info", version);
    const scalar = new Scalar(configuration);
    // A literal block: the JSON goes in verbatim, no escaping and no folding of the long line.
    scalar.type = Scalar.BLOCK_LITERAL;
    doc.setIn(["resources", 0, "typed_config", "config", "configuration", "value"], scalar);
    const text = doc.toString({ lineWidth: 0 });
    mkdirSync(dirname(this.file), { recursive: true });
    const staging = join(dirname(this.file), `.${basename(this.file)}.${process.pid}.next`);
    writeFileSync(staging, text);
    renameSync(staging, this.file);
    return Buffer.byteLength(text);
  }
}
