// `npm run explain`: runs a built filter in the proxy-wasm host on ONE described connection and
// prints one JSON object saying what the filter did with it and, in `decision`, what Envoy will
// do with the connection. Operators use it to answer "why did this connection go there" without
// an Envoy; tests use it as a black box. stdout carries only the JSON (run it as
// `npx tsx scripts/explain.ts ...` or `npm run --silent explain -- ...`). Exit status: 0 decided,
// 1 configuration refused (`refused` says why), 2 usage error, 3 the VM trapped. See README.md.
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { ProxyWasmHost, type HostLogLevel, type MetadataValue, type PropertyInputTree } from "../host/index.js";
import { describeDecision } from "./explain_decision.js";

const USAGE = `usage: npm run explain -- --filter NAME (--config JSON | --config-file PATH) --destination IP:PORT
         [--source IP:PORT] [--properties PATH] [--filter-state KEY=VALUE ...] [--mtls] [--sni NAME]
         [--node-network NAME] [--log-level debug] [--wasm PATH]
   or: npm run explain -- --input PATH   (a JSON file with the same fields, see README.md)`;

interface ExplainInput {
  filter: string;
  wasm?: string;
  configuration?: string | object;
  source?: string;
  destination: string;
  properties?: PropertyInputTree;
  /** Filter state set before the filter runs (e.g. shared by a CONNECT termination hop). */
  filterState?: Record<string, string>;
  mtls?: boolean;
  requestedServerName?: string;
  /** The proxy's node metadata (xds.node.metadata), e.g. {"NETWORK": "west"} as Istio sets it. */
  nodeMetadata?: Record<string, MetadataValue>;
  logLevel?: HostLogLevel;
}

function fail(message: string): never {
  process.stderr.write(`explain: ${message}\n${USAGE}\n`);
  process.exit(2);
}

function readInput(): ExplainInput {
  const { values } = parseArgs({
    options: {
      input: { type: "string" },
      filter: { type: "string" },
      wasm: { type: "string" },
      config: { type: "string" },
      "config-file": { type: "string" },
      source: { type: "string" },
      destination: { type: "string" },
      properties: { type: "string" },
      mtls: { type: "boolean" },
      sni: { type: "string" },
      "log-level": { type: "string" },
      "node-network": { type: "string" },
      "filter-state": { type: "string", multiple: true },
    },
    strict: true,
  });
  const fromFile: Partial<ExplainInput> = values.input ? JSON.parse(readFileSync(values.input, "utf8")) : {};
  const input: Partial<ExplainInput> = {
    ...fromFile,
    ...(values.filter && { filter: values.filter }),
    ...(values.wasm && { wasm: values.wasm }),
    ...(values.config !== undefined && { configuration: values.config }),
    ...(values["config-file"] && { configuration: readFileSync(values["config-file"], "utf8") }),
    ...(values.source && { source: values.source }),
    ...(values.destination && { destination: values.destination }),
    ...(values.properties && { properties: JSON.parse(readFileSync(values.properties, "utf8")) }),
    ...(values.mtls !== undefined && { mtls: values.mtls }),
    ...(values.sni && { requestedServerName: values.sni }),
    ...(values["log-level"] && { logLevel: values["log-level"] as HostLogLevel }),
    ...(values["node-network"] !== undefined && { nodeMetadata: { ...fromFile.nodeMetadata, NETWORK: values["node-network"] } }),
    ...(values["filter-state"] && {
      filterState: Object.fromEntries(values["filter-state"].map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)])),
    }),
  };
  if (!input.filter) fail("--filter is required");
  if (!input.destination) fail("--destination is required");
  return input as ExplainInput;
}

async function explain(input: ExplainInput): Promise<{ output: Record<string, unknown>; exitCode: number }> {
  const wasm = resolve(input.wasm ?? `build/${input.filter}.wasm`);
  if (!existsSync(wasm)) fail(`${wasm} does not exist: run \`npm run build\` first`);
  const configuration =
    typeof input.configuration === "object" ? JSON.stringify(input.configuration) : (input.configuration ?? "");
  const host = await ProxyWasmHost.fromFile(wasm, {
    rootId: input.filter,
    pluginConfiguration: configuration,
    logLevel: input.logLevel ?? "debug",
    ...(input.nodeMetadata && { nodeFields: { metadata: input.nodeMetadata } }),
  });
  const configured = host.start();
  const result: Record<string, unknown> = { filter: input.filter, wasm, configured };
  let exitCode = 0;
  if (configured) {
    const before = host.metrics();
    const connection = host.connect({
      source: input.source ?? "10.0.0.100:40000",
      destination: input.destination,
      mtls: input.mtls,
      requestedServerName: input.requestedServerName,
      properties: input.properties,
      filterState: input.filterState,
    });
    result.status = connection.status;
    result.closed = connection.closed;
    result.filterState = connection.filterStateWrites
      .filter((write) => write.source === "set_envoy_filter_state")
      .map(({ key, value, span }) => ({ key, value, span }));
    result.properties = Object.fromEntries(
      connection.filterStateWrites
        .filter((write) => write.source === "set_property")
        .map(({ key, value }) => [key, value]),
    );
    // What this connection moved, read before end(): the close callbacks are not the decision.
    const moved = Object.fromEntries(
      [...host.metrics()].map(([name, value]) => [name, value - (before.get(name) ?? 0)]).filter(([, delta]) => delta !== 0),
    );
    result.decision = describeDecision({
      filter: input.filter,
      destination: input.destination,
      closed: connection.closed,
      writes: connection.filterStateWrites.filter((w) => w.source !== "existing"),
      existing: input.filterState ?? {},
      moved,
    });
    connection.end();
  } else {
    // The filter's own one-line reason (logged by the canary VM, which refuses first), else the host's.
    const reason = host.logs().find((entry) => entry.level === "error" || entry.level === "critical");
    result.refused = reason?.message ?? host.startFailure ?? "configuration refused";
    exitCode = 1;
  }
  result.counters = Object.fromEntries(host.metrics());
  // Envoy checks a configuration in a throw-away "canary" VM first: its lines say why a
  // configuration was refused, so they are kept and marked.
  result.logs = host.logs().map(({ level, message, vm }) => (vm === "canary" ? { level, message, vm } : { level, message }));
  if (host.failed) {
    result.trap = host.trapMessage;
    exitCode = 3;
  }
  return { output: result, exitCode };
}

const { output, exitCode } = await explain(readInput());
process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
process.exitCode = exitCode;
