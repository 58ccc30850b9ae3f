// `npm run explain`: runs a built filter in the proxy-wasm host on ONE described connection and
// prints one JSON object saying what the filter did with it. Operators use it to answer "why did
// this connection go there" without an Envoy; tests use it as a black box. See README.md.
import { existsSync, readFileSync } from "node:fs";
import { resolve } from "node:path";
import { parseArgs } from "node:util";
import { ProxyWasmHost, type HostLogLevel, type PropertyInputTree } from "../host/index.js";

const USAGE = `usage: npm run explain -- --filter NAME (--config JSON | --config-file PATH) --destination IP:PORT
         [--source IP:PORT] [--properties PATH] [--filter-state KEY=VALUE ...] [--mtls] [--sni NAME]
         [--log-level debug] [--wasm PATH]
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
    ...(values["filter-state"] && {
      filterState: Object.fromEntries(values["filter-state"].map((pair) => [pair.slice(0, pair.indexOf("=")), pair.slice(pair.indexOf("=") + 1)])),
    }),
  };
  if (!input.filter) fail("--filter is required");
  if (!input.destination) fail("--destination is required");
  return input as ExplainInput;
}

async function explain(input: ExplainInput): Promise<object> {
  const wasm = resolve(input.wasm ?? `build/${input.filter}.wasm`);
  if (!existsSync(wasm)) fail(`${wasm} does not exist: run \`npm run build\` first`);
  const configuration =
    typeof input.configuration === "object" ? JSON.stringify(input.configuration) : (input.configuration ?? "");
  const host = await ProxyWasmHost.fromFile(wasm, {
    rootId: input.filter,
    pluginConfiguration: configuration,
    logLevel: input.logLevel ?? "debug",
  });
  const configured = host.start();
  const result: Record<string, unknown> = { filter: input.filter, wasm, configured };
  if (configured) {
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
    connection.end();
  } else {
    result.refused = host.startFailure ?? "configuration refused";
  }
  result.counters = Object.fromEntries(host.metrics());
  // Envoy checks a configuration in a throw-away "canary" VM first: its lines say why a
  // configuration was refused, so they are kept and marked.
  result.logs = host.logs().map(({ level, message, vm }) => (vm === "canary" ? { level, message, vm } : { level, message }));
  if (host.failed) result.trap = host.trapMessage;
  return result;
}

const output = await explain(readInput());
process.stdout.write(`${JSON.stringify(output, null, 2)}\n`);
