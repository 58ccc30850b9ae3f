// The plugin images end to end, with real parts only: `npm run package`'s images pushed to a real
// registry (crane registry serve on loopback), pulled by istio-agent's own fetcher (istio.io/istio
// pkg/wasm, the conversion pilot-agent runs on every ECDS response) from the WasmPlugins the
// rendered manifests carry, and the extracted module run by the real Envoy on a real connection.
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parseAllDocuments } from "yaml";
import { digestHex, IMAGES_DIR, readImageIndex, REPO_ROOT, type ImageIndex } from "../../images/images.js";
import { pushImages, type Pushed } from "../../images/push.js";
import { renderManifests } from "../../images/render.js";
import { EnvoyProcess } from "../support/envoy.js";
import { bootstrap, listener, staticCluster, tcpProxy } from "../support/envoy_config.js";
import { scratchDir } from "../support/paths.js";
import { freePort } from "../support/ports.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import {
  agentConvert,
  cachedModules,
  crane,
  istiodResource,
  RBAC_NETWORK_TYPE,
  startRegistry,
  WASM_NETWORK_TYPE,
  type AgentResult,
  type Registry,
  type WasmPluginDoc,
} from "./support.js";

/** The WasmPlugins of the rendered istio/ manifests (tunnel_port ships two). */
function renderedWasmPlugins(dir: string): WasmPluginDoc[] {
  return ["passthrough_mtls", "tunnel_port", "waypoint_route"].flatMap((filter) =>
    parseAllDocuments(readFileSync(join(dir, "istio", filter, "wasmplugin.yaml"), "utf8"))
      .map((d) => d.toJS())
      .filter((doc) => doc?.kind === "WasmPlugin"),
  );
}

/** A WasmPlugin for the probe image (no manifest ships it: it is the demonstration filter). */
function probePlugin(url: string, sha256: string, configuration: object): WasmPluginDoc {
  return {
    metadata: { name: "probe", namespace: "istio-system" },
    spec: { url, sha256, pluginName: "probe", failStrategy: "FAIL_CLOSE", imagePullPolicy: "IfNotPresent", pluginConfig: configuration },
  };
}

function flipLastHex(hex: string): string {
  return hex.slice(0, -1) + (hex.endsWith("0") ? "1" : "0");
}

/** The one converted resource's Wasm config, asserting the agent fetched it into its cache. */
function fetchedConfig(result: AgentResult): any {
  assert.equal(result.status, 0, `wasm-fetch: ${result.error ?? ""}\n${result.stderr}`);
  assert.equal(result.resources.length, 1);
  const typed = result.resources[0].typedConfig;
  assert.equal(typed["@type"], WASM_NETWORK_TYPE, `not fetched:\n${result.stderr}`);
  return typed.config;
}

/** Asserts pilot-agent refused the module: nothing cached, its deny-all RBAC filter instead. */
function assertDenyAll(result: AgentResult, reason: RegExp): void {
  assert.equal(result.resources.length, 1);
  const typed = result.resources[0].typedConfig;
  assert.equal(typed["@type"], RBAC_NETWORK_TYPE, "a FAIL_CLOSE plugin that cannot be fetched becomes network RBAC");
  assert.equal(typed.statPrefix, "wasm-default-deny");
  assert.deepEqual(typed.rules, {}, "deny all: ALLOW rules with no policy");
  assert.match(result.stderr, reason);
  assert.deepEqual(cachedModules(result.cacheDir), [], "no module reaches the cache");
}

describe("plugin images: registry, istio-agent's fetcher, the real Envoy", () => {
  let index: ImageIndex;
  let registry: Registry;
  let pushed: Pushed[];
  let manifests: string;

  before(async () => {
    index = readImageIndex();
    registry = await startRegistry();
    pushed = pushImages(registry.host);
    manifests = scratchDir("manifests-");
    renderManifests(registry.host, index, manifests);
  });

  after(async () => {
    await registry?.stop();
  });

  it("crane push stores every image under the digest the build recorded, tag and digest alike", () => {
    assert.deepEqual(pushed.map((p) => p.filter).sort(), Object.keys(index.images).sort());
    for (const [filter, image] of Object.entries(index.images)) {
      const byDigest = `${registry.host}/${image.repository}@${image.digest}`;
      assert.equal(pushed.find((p) => p.filter === filter)?.pinned, byDigest);
      assert.equal(crane("digest", `${registry.host}/${image.repository}:${image.tag}`).trim(), image.digest);
      // The compat layout: an OCI manifest whose one layer is a gzip tar (istio-agent reads the last).
      const manifest = JSON.parse(crane("manifest", byDigest));
      assert.equal(manifest.mediaType, "application/vnd.oci.image.manifest.v1+json");
      assert.equal(manifest.config.mediaType, "application/vnd.oci.image.config.v1+json");
      assert.deepEqual(manifest.layers.map((l: any) => [l.mediaType, l.digest]), [["application/vnd.oci.image.layer.v1.tar+gzip", image.layerDigest]]);
      assert.equal(manifest.annotations["org.opencontainers.image.version"], image.tag);
    }
  });

  it("istio-agent pulls each rendered WasmPlugin's image, checks its sha256 and extracts plugin.wasm byte for byte", () => {
    const plugins = renderedWasmPlugins(manifests);
    assert.equal(plugins.length, 4, "passthrough_mtls, tunnel_port client and server, waypoint_route");
    for (const wp of plugins) {
      const config = fetchedConfig(agentConvert([istiodResource(wp)]));
      assert.equal(config.rootId, wp.spec.pluginName);
      const file = config.vmConfig.code.local.filename;
      assert.deepEqual(readFileSync(file), readFileSync(join(REPO_ROOT, "build", `${wp.spec.pluginName}.wasm`)), `${wp.metadata.name}: ${file}`);
      // The cache names the module after the manifest digest the WasmPlugin pins.
      assert.ok(file.endsWith(`/${wp.spec.sha256}.wasm`), file);
      assert.equal(config.vmConfig.environmentVariables, undefined, "the agent strips its ISTIO_META_* variables");
    }
  });

  it("a wrong sha256 is refused: nothing is extracted, pilot-agent hands Envoy its deny-all RBAC filter", () => {
    const image = index.images.passthrough_mtls;
    const wrong = flipLastHex(digestHex(image.digest));
    // The right image by digest, a sha256 that is not its digest.
    const byDigest = probePlugin(`oci://${registry.host}/${image.repository}@${image.digest}`, wrong, {});
    assertDenyAll(agentConvert([istiodResource(byDigest)]), new RegExp(`checksum ${digestHex(image.digest)}, which does not match: ${wrong}`));
    // By tag with a wrong sha256: the same refusal.
    const byTag = probePlugin(`oci://${registry.host}/${image.repository}:${image.tag}`, wrong, {});
    assertDenyAll(agentConvert([istiodResource(byTag)]), /which does not match/);
    // A digest the registry does not have: no manifest to pull.
    const unknown = probePlugin(`oci://${registry.host}/${image.repository}@sha256:${wrong}`, wrong, {});
    assertDenyAll(agentConvert([istiodResource(unknown)]), /could not fetch manifest/);
  });

  it("a moved tag cannot swap the module under a pinned sha256; the digest url still pulls the original", () => {
    const shipped = index.images.passthrough_mtls;
    const other = index.images.probe;
    const repository = `${registry.host}/retag-${shipped.repository}`;
    crane("push", join(IMAGES_DIR, shipped.layout), `${repository}:${shipped.tag}`);
    const pinned = digestHex(shipped.digest);
    fetchedConfig(agentConvert([istiodResource(probePlugin(`oci://${repository}:${shipped.tag}`, pinned, {}))]));
    // Someone re-pushes the tag with other content.
    crane("push", join(IMAGES_DIR, other.layout), `${repository}:${shipped.tag}`);
    assertDenyAll(agentConvert([istiodResource(probePlugin(`oci://${repository}:${shipped.tag}`, pinned, {}))]), /which does not match/);
    const config = fetchedConfig(agentConvert([istiodResource(probePlugin(`oci://${repository}@${shipped.digest}`, pinned, {}))]));
    assert.deepEqual(readFileSync(config.vmConfig.code.local.filename), readFileSync(join(REPO_ROOT, "build/passthrough_mtls.wasm")));
  });

  describe("the real Envoy on what istio-agent hands it", () => {
    let envoy: EnvoyProcess;
    let backendA: Backend;
    let backendDefault: Backend;
    const ports = { admin: 0, probe: 0, denied: 0, a: 0, fallback: 0 };
    const shipped: { name: string; wp: WasmPluginDoc }[] = [];

    /** A listener whose one network filter comes over ECDS from `file`, then tcp_proxy. */
    function ecdsListener(name: string, address: string, port: number, resourceName: string, file: string): object {
      return listener({
        name,
        address,
        port,
        filters: [
          {
            name: resourceName,
            config_discovery: {
              config_source: { path_config_source: { path: file } },
              // As Istio's own hookups: the Wasm filter, or the agent's RBAC stand-in.
              type_urls: [WASM_NETWORK_TYPE, RBAC_NETWORK_TYPE],
            },
          },
          tcpProxy(name, "backend_default"),
        ],
      });
    }

    function ecdsFile(result: AgentResult): string {
      const file = join(scratchDir("ecds-"), "resource.json");
      const resources = result.resources.map((r) => ({ "@type": "type.googleapis.com/envoy.config.core.v3.TypedExtensionConfig", ...r }));
      writeFileSync(file, JSON.stringify({ version_info: "1", resources }));
      return file;
    }

    before(async () => {
      for (const key of Object.keys(ports) as (keyof typeof ports)[]) ports[key] = await freePort();
      backendA = await startBackend("backend_a", "127.0.0.1", ports.a);
      backendDefault = await startBackend("backend_default", "127.0.0.1", ports.fallback);
      const probe = index.images.probe;
      const routes = { routes: { "127.0.0.2": "backend_a" } };
      const pulled = agentConvert([istiodResource(probePlugin(`oci://${registry.host}/${probe.repository}@${probe.digest}`, digestHex(probe.digest), routes))]);
      fetchedConfig(pulled);
      const refused = agentConvert([istiodResource(probePlugin(`oci://${registry.host}/${probe.repository}@${probe.digest}`, flipLastHex(digestHex(probe.digest)), routes))]);
      const listeners = [
        ecdsListener("probe_pulled", "127.0.0.2", ports.probe, pulled.resources[0].name, ecdsFile(pulled)),
        ecdsListener("probe_refused", "127.0.0.2", ports.denied, refused.resources[0].name, ecdsFile(refused)),
      ];
      // Each shipped filter's pulled module with its rendered pluginConfig, on a listener of its own.
      for (const wp of renderedWasmPlugins(manifests)) {
        const result = agentConvert([istiodResource(wp)]);
        fetchedConfig(result);
        const name = `${wp.metadata.name}_${shipped.length}`;
        shipped.push({ name, wp });
        listeners.push(ecdsListener(name, "127.0.0.1", await freePort(), result.resources[0].name, ecdsFile(result)));
      }
      envoy = await EnvoyProcess.start({
        name: "pulled-images",
        adminPort: ports.admin,
        config: {
          // A file-based ECDS subscription needs a node identity, as a sidecar's bootstrap has.
          node: { id: "sidecar~127.0.0.1~pulled-images.default~default.svc.cluster.local", cluster: "pulled-images.default" },
          ...bootstrap({
            adminPort: ports.admin,
            listeners,
            clusters: [staticCluster("backend_a", "127.0.0.1", ports.a), staticCluster("backend_default", "127.0.0.1", ports.fallback)],
          }),
        },
      });
    });

    after(async () => {
      await envoy?.stop();
      await backendA?.close();
      await backendDefault?.close();
    });

    it("the probe module pulled from the registry routes a real connection to the cluster its route names", async () => {
      const reply = await exchange("127.0.0.2", ports.probe, "hello");
      assert.equal(reply.received.toString(), "backend_a\nhello");
      const stats = await envoy.waitForStats((s) => [...s].some(([k, v]) => k.endsWith("probe.routed") && v >= 1));
      assert.equal([...stats].find(([k]) => k.endsWith("probe.routed"))?.[1], 1);
    });

    // Envoy's network RBAC filter decides on the connection's first byte (enforcement
    // ONE_TIME_ON_FIRST_BYTE): by then tcp_proxy may have connected upstream, so a server-first
    // backend's greeting can reach the client; the client's own bytes never reach the backend.
    it("the deny-all stand-in of a refused image closes the connection before the client's bytes reach a backend", async () => {
      const reply = await exchange("127.0.0.2", ports.denied, "hello");
      const received = reply.received.toString();
      assert.ok("backend_default\n".startsWith(received), `at most the server-first greeting, never the echo: ${JSON.stringify(received)}`);
      const stats = await envoy.waitForStats((s) => (s.get("wasm-default-deny.rbac.denied") ?? 0) >= 1);
      assert.equal(stats.get("wasm-default-deny.rbac.denied"), 1);
      assert.equal(stats.get("wasm-default-deny.rbac.allowed"), 0);
    });

    it("each shipped filter's pulled module starts in Envoy's VM and accepts its rendered pluginConfig", async () => {
      const stats = await envoy.stats();
      for (const { wp } of shipped) {
        const ecds = [...stats].filter(([k]) => k.startsWith("extension_config_discovery.") && k.includes(`${wp.metadata.namespace}.${wp.metadata.name}`));
        const value = (suffix: string) => ecds.filter(([k]) => k.endsWith(suffix)).reduce((sum, [, v]) => sum + v, 0);
        // A module that fails to start, or refuses its configuration, counts update_rejected and config_fail.
        assert.ok(value(".update_success") >= 1, `${wp.metadata.name}: ${JSON.stringify(ecds)}\n${envoy.log().slice(-3000)}`);
        assert.equal(value(".update_rejected"), 0, `${wp.metadata.name}: ${JSON.stringify(ecds)}`);
        assert.equal(value(".config_fail"), 0, `${wp.metadata.name}: ${JSON.stringify(ecds)}`);
      }
    });
  });
});
