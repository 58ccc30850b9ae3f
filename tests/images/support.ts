// What the image tests run: a real registry (go-containerregistry's `crane registry serve`, on
// loopback, blobs on disk), istio-agent's own module fetcher (tests/wasmfetch, istio.io/istio
// pkg/wasm), and the ECDS resource istiod serves for a WasmPlugin, built the way istiod builds it.
import { spawn, spawnSync, type ChildProcess } from "node:child_process";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { tool } from "../../images/images.js";
import { scratchDir } from "../support/paths.js";

export interface Registry {
  /** `127.0.0.1:<port>`: the registry part of an image reference. */
  host: string;
  stop(): Promise<void>;
}

/** Starts `crane registry serve` on a kernel-chosen loopback port; resolves once it listens. */
export function startRegistry(): Promise<Registry> {
  const child: ChildProcess = spawn(tool("crane"), ["registry", "serve", "--address", "127.0.0.1:0", "--disk", scratchDir("registry-")], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const stop = () =>
    new Promise<void>((done) => {
      if (child.exitCode !== null || child.signalCode !== null) return done();
      child.once("exit", () => done());
      child.kill("SIGTERM");
    });
  return new Promise((done, fail) => {
    let output = "";
    const timer = setTimeout(() => {
      void stop();
      fail(new Error(`crane registry serve did not say it listens within 10 s: ${output}`));
    }, 10_000);
    child.stderr?.setEncoding("utf8");
    child.stderr?.on("data", (text: string) => {
      output += text;
      const port = /serving on port (\d+)/.exec(output)?.[1];
      if (port) {
        clearTimeout(timer);
        done({ host: `127.0.0.1:${port}`, stop });
      }
    });
    child.once("exit", (code) => {
      clearTimeout(timer);
      fail(new Error(`crane registry serve exited (${code}): ${output}`));
    });
  });
}

/** `crane <args>`, its stdout; throws with crane's stderr on failure. */
export function crane(...args: string[]): string {
  const result = spawnSync(tool("crane"), args, { encoding: "utf8", timeout: 60_000 });
  if (result.status !== 0) throw new Error(`crane ${args.join(" ")}: ${result.stderr}`);
  return result.stdout;
}

export interface AgentResult {
  /** 0 converted, 1 the conversion reported an error, 2 usage (wasm-fetch's exit status). */
  status: number | null;
  /** The resources as pilot-agent hands them to Envoy. */
  resources: any[];
  error?: string;
  stderr: string;
  /** The agent's module cache directory. */
  cacheDir: string;
}

/** Runs istio-agent's conversion of ECDS resources (pkg/wasm) with a fresh module cache. */
export function agentConvert(resources: object[]): AgentResult {
  const cacheDir = scratchDir("agent-cache-");
  const result = spawnSync(tool("wasm-fetch"), ["-cache", cacheDir], { input: JSON.stringify(resources), encoding: "utf8", timeout: 120_000 });
  let parsed: { resources?: any[]; error?: string } = {};
  try {
    parsed = JSON.parse(result.stdout);
  } catch {
    throw new Error(`wasm-fetch printed no JSON (status ${result.status}): ${result.stdout}${result.stderr}`);
  }
  return { status: result.status, resources: parsed.resources ?? [], error: parsed.error, stderr: result.stderr, cacheDir };
}

/** Every module file in an agent cache directory (it keeps one directory per image name). */
export function cachedModules(cacheDir: string): string[] {
  return readdirSync(cacheDir, { recursive: true, encoding: "utf8" }).filter((f) => f.endsWith(".wasm")).map((f) => join(cacheDir, f));
}

export interface WasmPluginDoc {
  metadata: { name: string; namespace: string };
  spec: { url: string; sha256?: string; pluginName: string; failStrategy?: string; imagePullPolicy?: string; pluginConfig?: object };
}

export const WASM_NETWORK_TYPE = "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm";
export const RBAC_NETWORK_TYPE = "type.googleapis.com/envoy.extensions.filters.network.rbac.v3.RBAC";

/** The ECDS name istiod 1.30+ gives a WasmPlugin's resource. */
export function ecdsName(wp: WasmPluginDoc): string {
  return `extensions.istio.io/trafficextension/${wp.metadata.namespace}.${wp.metadata.name}~istio-translated-wasmplugin`;
}

/**
 * The ECDS resource istiod serves for a NETWORK WasmPlugin, field for field as istiod's
 * pilot/pkg/model/extensions.go builds it (buildWasmConfig, buildDataSource, buildVMConfig): the
 * url and sha256 unchanged in a remote data source (a 30 s timeout, cluster "_"), the pull policy
 * and resource version in ISTIO_META_* variables the agent strips. That it is what istiod serves
 * is checked against istiod's own generation for both eras (tests/istio/istiod_wasmplugin_ecds.test.ts).
 */
export function istiodResource(wp: WasmPluginDoc, resourceVersion = "1"): object {
  const keyValues: Record<string, string> = { ISTIO_META_WASM_PLUGIN_RESOURCE_VERSION: resourceVersion };
  if (wp.spec.imagePullPolicy) keyValues.ISTIO_META_WASM_IMAGE_PULL_POLICY = wp.spec.imagePullPolicy;
  const failurePolicy = { FAIL_CLOSE: "FAIL_CLOSED", FAIL_OPEN: "FAIL_OPEN", FAIL_RELOAD: "FAIL_RELOAD" }[wp.spec.failStrategy ?? ""];
  return {
    name: ecdsName(wp),
    typedConfig: {
      "@type": WASM_NETWORK_TYPE,
      config: {
        name: `${wp.metadata.namespace}.${wp.metadata.name}~istio-translated-wasmplugin`,
        rootId: wp.spec.pluginName,
        configuration: { "@type": "type.googleapis.com/google.protobuf.StringValue", value: JSON.stringify(wp.spec.pluginConfig ?? {}) },
        vmConfig: {
          runtime: "envoy.wasm.runtime.v8",
          code: { remote: { httpUri: { uri: wp.spec.url, cluster: "_", timeout: "30s" }, ...(wp.spec.sha256 ? { sha256: wp.spec.sha256 } : {}) } },
          environmentVariables: { keyValues },
        },
        ...(failurePolicy ? { failurePolicy } : {}),
      },
    },
  };
}
