// The feed's image run as an operator runs it, inside a private network + mount namespace
// (tests/compose/feed_image.test.ts starts this file under scripts/docker-netns.sh): the image is
// built from feed/image/Dockerfile on the private engine (its base, node:20-bookworm-slim, is the
// local stand-in that scripts/docker-images.sh makes), then run with the settings of the shipped
// Deployment (feed/deploy/deployment.yaml: its args, user, read-only root filesystem, dropped
// capabilities, no privilege escalation, its config mounted read-only) against a real
// kube-apiserver, with its certificate from the mesh CA as the Secret would hold it and the
// in-cluster credentials a kubelet would give it (a bound
// ServiceAccount token of the shipped RBAC). It must turn Ready, and a real Envoy whose
// passthrough_mtls polls it must follow a pod created in the API server.
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { chmodSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { parse, parseAllDocuments, stringify } from "yaml";
import { CLIENT_ADDRESS, captureOutbound, releaseCapture } from "../support/capture.js";
import { EnvoyProcess } from "../support/envoy.js";
import { jemallocPin } from "../support/feed_runtime.js";
import { startKubeCluster, type KubeCluster } from "../support/kube.js";
import { REPO_ROOT, scratchDir } from "../support/paths.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { exchange, startBackend, type Backend } from "../support/tcp.js";
import { CERT_DIR, DEMO_IDENTITIES, writeDemoCerts } from "../../scripts/demo-certs.js";
import { meshFeedSidecarConfig } from "../feed/delta_envoy_config.js";
import { eventually, feedKubeconfig } from "../feed/harness.js";
import { docker, engineEnv } from "./docker.js";

const VERSION = JSON.parse(readFileSync(join(REPO_ROOT, "package.json"), "utf8")).version as string;
const IMAGE = `mesh-feed:${VERSION}`;
const CONTAINER = "mesh-feed-under-test";
const SIDECAR = `URI:${DEMO_IDENTITIES.sidecar}`;

interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: { name: string; value?: string; valueFrom?: { fieldRef?: { fieldPath: string } } }[];
  ports: { name: string; containerPort: number }[];
  readinessProbe: { exec: { command: string[] } };
  securityContext: { allowPrivilegeEscalation?: boolean; readOnlyRootFilesystem?: boolean; capabilities?: { drop?: string[] } };
  volumeMounts: { name: string; mountPath: string; readOnly?: boolean }[];
}

/** Where the test keeps each of the pod's volumes (by volume name). */
type Volumes = Record<string, string>;

/** The shipped Deployment and ConfigMap, as an operator applies them. */
function shipped() {
  const docs = ["deployment.yaml", "config.yaml"].flatMap((f) => parseAllDocuments(readFileSync(join(REPO_ROOT, "feed/deploy", f), "utf8")).map((d) => d.toJS()));
  const deployment = docs.find((d) => d.kind === "Deployment");
  const configMap = docs.find((d) => d.kind === "ConfigMap");
  assert.ok(deployment && configMap, "feed/deploy has a Deployment and a ConfigMap");
  const pod = deployment.spec.template.spec;
  assert.equal(pod.containers.length, 1);
  return { pod, container: pod.containers[0] as Container, configMap: configMap as { data: Record<string, string> } };
}

/**
 * `docker run` flags that apply the pod's and container's settings as a kubelet would: the
 * user, the read-only root, no capabilities, no privilege escalation, the config volume
 * read-only at its mountPath, and the service account's token, CA and namespace where the
 * in-cluster client reads them. Host networking: the API server and Envoy are on the
 * namespace's loopback, as a pod's sidecar and the node's API endpoint would be reachable.
 */
function runFlags(pod: any, container: Container, volumes: Volumes, serviceAccountDir: string, apiServerPort: string): string[] {
  const flags = ["--detach", "--name", CONTAINER, "--network", "host"];
  const user = pod.securityContext?.runAsUser;
  assert.ok(typeof user === "number" && user > 0, "the Deployment runs as a numeric non-root user");
  flags.push("--user", `${user}:${user}`);
  if (container.securityContext.readOnlyRootFilesystem) flags.push("--read-only");
  for (const cap of container.securityContext.capabilities?.drop ?? []) flags.push("--cap-drop", cap);
  if (container.securityContext.allowPrivilegeEscalation === false) flags.push("--security-opt", "no-new-privileges");
  for (const mount of container.volumeMounts) {
    const dir = volumes[mount.name];
    assert.ok(dir, `the test has no stand-in for volume ${mount.name}`);
    flags.push("--volume", `${dir}:${mount.mountPath}${mount.readOnly ? ":ro" : ""}`);
  }
  flags.push("--volume", `${serviceAccountDir}:/var/run/secrets/kubernetes.io/serviceaccount:ro`);
  flags.push("--env", "KUBERNETES_SERVICE_HOST=127.0.0.1", "--env", `KUBERNETES_SERVICE_PORT=${apiServerPort}`);
  // The container's environment (NODE_OPTIONS, MALLOC_CONF ...), the pod's name as the kubelet fills it in.
  for (const variable of container.env ?? []) {
    if (variable.value !== undefined) flags.push("--env", `${variable.name}=${variable.value}`);
    else if (variable.valueFrom?.fieldRef?.fieldPath === "metadata.name") flags.push("--env", `${variable.name}=${CONTAINER}`);
    else assert.fail(`the test has no stand-in for env ${variable.name}`);
  }
  return flags;
}

/** The container's output, stdout and stderr together (docker logs splits them as the container wrote them). */
function containerLog(): string {
  return execFileSync("sh", ["-c", `docker logs ${CONTAINER} 2>&1`], { cwd: REPO_ROOT, env: { ...process.env, ...engineEnv() }, encoding: "utf8" });
}

function dial(host: string, port: number, payload: string) {
  return exchange(host, port, payload, 1_000, CLIENT_ADDRESS);
}

describe("the feed's image, run with the shipped Deployment's settings", { concurrency: false }, () => {
  let cluster: KubeCluster;
  let envoy: EnvoyProcess;
  let httpbin: TlsPod;
  let plain11: Backend;
  let feedPort = 0;

  before(async () => {
    execFileSync("bash", ["scripts/docker-engine.sh", "start"], { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"], timeout: 120_000 });
    Object.assign(process.env, engineEnv());
    execFileSync("bash", ["scripts/docker-images.sh", "build"], { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"], timeout: 900_000 });
    execFileSync("node", ["feed/image/bundle.mjs"], { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"], timeout: 120_000 });
    docker(["rm", "--force", CONTAINER]);
    await writeDemoCerts();
    cluster = await startKubeCluster({ name: "feed-image" });
    await cluster.createNamespace("default");
  });

  after(async () => {
    try {
      releaseCapture();
      await envoy?.stop();
      if (process.env.COMPOSE_TEST_VERBOSE) console.log(containerLog());
      docker(["rm", "--force", CONTAINER]);
    } finally {
      execFileSync("bash", ["scripts/docker-engine.sh", "stop"], { cwd: REPO_ROOT, stdio: ["ignore", "inherit", "inherit"] });
    }
    await cluster?.stop();
    for (const p of [httpbin, plain11]) await p?.close();
  });

  it("builds from feed/image/Dockerfile: compiled JavaScript, no tsx, a non-root user", () => {
    docker(["build", "--quiet", "--tag", IMAGE, "build/feed-image"], 600_000);
    const config = JSON.parse(docker(["image", "inspect", "--format", "{{json .Config}}", IMAGE]));
    assert.equal(config.User, "65532:65532");
    assert.deepEqual(config.Entrypoint, ["node", "/opt/mesh-feed/main.mjs"]);
    const app = docker(["run", "--rm", "--entrypoint", "find", IMAGE, "/opt/mesh-feed", "-type", "f"]).split("\n").filter(Boolean).sort();
    assert.deepEqual(app, ["/opt/mesh-feed/main.mjs", "/opt/mesh-feed/main.mjs.LEGAL.txt", ...["passthrough_mtls", "tunnel_port", "waypoint_route"].map((f) => `/opt/mesh-feed/wasm/${f}.wasm`)]);
    // Nothing of the build's tools anywhere in the image (root may read every directory).
    const tools = docker(["run", "--rm", "--user", "0", "--entrypoint", "find", IMAGE, "/", "-xdev", "(", "-name", "tsx", "-o", "-name", "node_modules", "-o", "-name", "esbuild", ")", "-print"]);
    assert.equal(tools.trim(), "");
  });

  it("carries jemalloc at the pinned version, preloaded for every process, and no apt package lists", () => {
    const config = JSON.parse(docker(["image", "inspect", "--format", "{{json .Config}}", IMAGE]));
    assert.ok(config.Env.includes("LD_PRELOAD=/usr/local/lib/libjemalloc.so.2"), `the image's environment: ${config.Env.join(" ")}`);
    const version = docker(["run", "--rm", "--entrypoint", "dpkg-query", IMAGE, "--showformat", "${Version}", "--show", "libjemalloc2"]).trim();
    assert.equal(`libjemalloc2=${version}`, jemallocPin(), "the installed libjemalloc2 is the one feed/image/Dockerfile pins, the one the tests preload");
    const target = docker(["run", "--rm", "--entrypoint", "readlink", IMAGE, "-e", "/usr/local/lib/libjemalloc.so.2"]).trim();
    assert.match(target, /^\/usr\/lib\/[^/]+\/libjemalloc\.so\.2$/);
    // What the install fetched is gone: package lists, downloaded .debs, apt's caches.
    const left = docker(["run", "--rm", "--user", "0", "--entrypoint", "find", IMAGE, "/var/lib/apt/lists", "/var/cache/apt", "-type", "f", "(", "-path", "/var/lib/apt/lists/*", "-o", "-name", "*.deb", "-o", "-name", "*.bin", ")", "-print"]);
    assert.equal(left.trim(), "");
  });

  it("runs with the Deployment's settings against the real API server until Ready", async () => {
    const { pod, container, configMap } = shipped();
    assert.equal(container.image.split(":").at(-1), VERSION, "the Deployment's image tag is the package version");
    // The shipped configuration with one more target: the sidecar Envoy below polls it over meshFeed.
    const feedYaml = parse(configMap.data["feed.yaml"]);
    feedYaml.targets.push({ name: "sidecar", filter: "passthrough_mtls", network: "", readers: [DEMO_IDENTITIES.sidecar.replace("spiffe://", "")] });
    feedPort = feedYaml.channel.port;
    const configDir = scratchDir("feed-image-config-");
    for (const [file, text] of Object.entries(configMap.data)) writeFileSync(join(configDir, file), file === "feed.yaml" ? stringify(feedYaml) : text, { mode: 0o644 });
    // The Secret mesh-feed-tls: the feed's workload certificate from the mesh CA (cert-manager's layout).
    const tlsDir = scratchDir("feed-image-tls-");
    for (const [to, from] of [["tls.crt", "feed.crt"], ["tls.key", "feed.key"], ["ca.crt", "ca.crt"]]) writeFileSync(join(tlsDir, to), readFileSync(join(CERT_DIR, from)), { mode: 0o644 });
    // What the kubelet mounts for the pod's ServiceAccount (the shipped RBAC is applied to it).
    const kubeconfig = parse(readFileSync(await feedKubeconfig(cluster), "utf8"));
    const serviceAccountDir = scratchDir("feed-image-sa-");
    writeFileSync(join(serviceAccountDir, "token"), kubeconfig.users[0].user.token, { mode: 0o644 });
    writeFileSync(join(serviceAccountDir, "ca.crt"), Buffer.from(kubeconfig.clusters[0].cluster["certificate-authority-data"], "base64"), { mode: 0o644 });
    writeFileSync(join(serviceAccountDir, "namespace"), "mesh-feed", { mode: 0o644 });
    // As a kubelet mounts ConfigMap, Secret and token volumes: readable by the pod's user.
    for (const dir of [configDir, tlsDir, serviceAccountDir]) chmodSync(dir, 0o755);
    const apiServerPort = new URL(kubeconfig.clusters[0].cluster.server).port;
    docker(["run", ...runFlags(pod, container, { config: configDir, tls: tlsDir }, serviceAccountDir, apiServerPort), IMAGE, ...(container.args ?? [])]);
    // The Deployment's readiness probe, run as the kubelet runs an exec probe: inside the container.
    const probe = container.readinessProbe.exec.command;
    const { value: state } = await eventually("the container passes its readiness probe or stops", 60_000, async () => {
      if (docker(["inspect", "--format", "{{.State.Running}}", CONTAINER]).trim() !== "true") return "stopped";
      try {
        docker(["exec", CONTAINER, ...probe]);
        return "ready";
      } catch {
        return undefined;
      }
    });
    assert.equal(state, "ready", `the container stopped; its log:\n${containerLog()}`);
    // ld.so only warns when a preload fails: the feed (pid 1) must have jemalloc mapped, and its
    // background threads exist only when jemalloc read the Deployment's MALLOC_CONF.
    const maps = docker(["exec", CONTAINER, "cat", "/proc/1/maps"]);
    assert.match(maps, /\/usr\/lib\/[^/\n]+\/libjemalloc\.so\.2$/m, "the feed's process has no libjemalloc mapped");
    assert.match(docker(["exec", CONTAINER, "sh", "-c", "cat /proc/1/task/*/comm"]), /^jemalloc_bg_thd$/m, "no jemalloc background thread in the feed");
    // The shipped WasmPlugin target is applied with the shipped RBAC (readiness says published,
    // which today precedes the apply: wait for it).
    const ref = { apiVersion: "extensions.istio.io/v1alpha1", kind: "WasmPlugin", metadata: { namespace: "istio-system", name: "passthrough-mtls" } };
    await eventually("the feed's WasmPlugin in the API server", 30_000, async () => ((await cluster.objects.read(ref)) as any).spec?.pluginConfig ?? undefined);
  });

  it("serves a real Envoy: a pod created in the API server gets mTLS with its identity", async () => {
    httpbin = await startTlsPod("httpbin-0", "127.0.0.11", 8443, CERT_DIR, "pod-a");
    plain11 = await startBackend("plain-11", "127.0.0.11", 8080);
    envoy = await EnvoyProcess.start({ name: "feed-image", adminPort: 15000, config: meshFeedSidecarConfig(feedPort, "sidecar") });
    captureOutbound(15001);
    await eventually("the feed's model in the sidecar", 30_000, async () => ((await envoy.stats()).get("wasmcustom.passthrough_mtls.feed.applied_full") ?? 0) >= 1 ? true : undefined);
    assert.equal((await dial("127.0.0.11", 8080, "hello")).received.toString(), "plain-11\nhello");
    await cluster.createPod({ namespace: "default", name: "httpbin-0", labels: { app: "demo", "security.istio.io/tlsMode": "istio" }, serviceAccountName: "httpbin" });
    await cluster.setPodStatus("default", "httpbin-0", { podIP: "127.0.0.11" });
    await eventually("mTLS to the new pod", 30_000, async () => ((await dial("127.0.0.11", 8443, "ping-1")).received.toString() === `httpbin-0 peer=${SIDECAR}\nping-1` ? true : undefined));
  });
});
