// Upgrades in the real Envoy (the pinned .venv/envoy), fed what istiod generated for the upgrade
// scenarios (tests/istio/common/upgrade_test.go, passthrough_mtls): a canary sidecar runs the new
// module; and what a connection open during an update keeps, per install route:
//   route B: the promotion is an ECDS update (same resource name, the new module): Envoy builds
//     a new filter config and VM for new connections; a connection already open keeps its filter
//     and is not drained or closed, however long it lasts;
//   route A: the module and the snapshot live in the listener, so any change is a listener update:
//     Envoy drains the changed filter chain, and a connection open on it is closed when the drain
//     time ends (Envoy's --drain-time-s; pilot-agent passes the proxy's drainDuration, 45 s by
//     default), while new connections take the new listener at once.
// Envoy runs with --drain-time-s 4 here so the drain ends within the test. Runs inside the test
// network namespace (npm run test:istio).
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync } from "node:fs";
import { connect, type Socket } from "node:net";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import { spiffe } from "../support/certs.js";
import { EnvoyProcess, sleep } from "../support/envoy.js";
import { startTlsPod, type TlsPod } from "../support/pods.js";
import { REPO_ROOT } from "../support/paths.js";
import { exchange } from "../support/tcp.js";
import { ERAS, loadDump, trafficExtensionName, type Dump } from "./dump.js";
import { CLIENT_IP, closeWithin, meshCerts, meshNetwork, translateFor, type MeshCerts } from "./envoy_sidecar.js";
import { readUpgradeModules, UPGRADE_DIR } from "./upgrade_inputs.js";
import { pushFile, translate, type Translation } from "./xds_files.js";

const SLEEP = `URI:${spiffe("default", "sleep")}`;
const HTTPBIN = { host: "10.244.1.17", port: 9999 };
const MAIN = trafficExtensionName("istio-system", "passthrough-mtls");
const CANARY = trafficExtensionName("istio-system", "passthrough-mtls-canary");
const DRAIN_TIME_S = 4;

const upgradeDump = (era: string, route: string, proxy = "client"): Dump => loadDump(era, "passthrough_mtls", route, proxy, "upgrade");

interface Sidecar {
  envoy: EnvoyProcess;
  translation: Translation;
}

/**
 * Envoy on one dump, with a short drain time; requires istiod's listeners and clusters accepted.
 * `wasmDir`: where route A's mounted module is (default build/, the release the repository builds).
 */
async function sidecar(d: Dump, certs: MeshCerts, name: string, wasmDir?: string): Promise<Sidecar> {
  const translation = wasmDir
    ? translate(d, mkdtempSync(join(REPO_ROOT, ".tmp", `istio-xds-${name}-`)), {
        certChain: readFileSync(join(certs.dir, "sleep.crt"), "utf8"),
        key: readFileSync(join(certs.dir, "sleep.key"), "utf8"),
        rootCa: certs.ca.cert,
      }, { ecds: "ecdsAgent", adminPort: 15000, wasmDir, nodeId: `sidecar~${CLIENT_IP}~sleep-0.default~default.svc.cluster.local` })
    : translateFor(d, certs, "sleep", { ecds: "ecdsAgent", name });
  const envoy = await EnvoyProcess.start({ name, adminPort: 15000, config: translation.bootstrap, readyTimeoutMs: 30_000, extraArgs: ["--drain-time-s", String(DRAIN_TIME_S)] });
  const stats = await envoy.waitForStats((s) => (s.get("listener_manager.lds.update_success") ?? 0) >= 1 && (s.get("cluster_manager.cds.update_success") ?? 0) >= 1, 10_000);
  assert.equal(stats.get("listener_manager.lds.update_rejected") ?? 0, 0, envoy.log());
  return { envoy, translation };
}

/** A client connection held open: send a line, wait for its echo. */
interface Held {
  socket: Socket;
  received: () => string;
  closed: Promise<number>;
  roundTrip(text: string, timeoutMs?: number): Promise<void>;
}

function hold(host: string, port: number): Promise<Held> {
  return new Promise((done, fail) => {
    let text = "";
    const socket = connect({ host, port, localAddress: CLIENT_IP });
    const closed = new Promise<number>((resolve) => socket.on("close", () => resolve(Date.now())));
    socket.on("data", (chunk: Buffer) => { text += chunk.toString(); });
    socket.on("error", () => socket.destroy());
    socket.once("error", fail);
    socket.on("connect", () => done({
      socket,
      received: () => text,
      closed,
      roundTrip: async (line, timeoutMs = 10_000) => {
        socket.write(line);
        const until = Date.now() + timeoutMs;
        while (!text.endsWith(line)) {
          if (Date.now() > until || socket.destroyed) throw new Error(`no echo of ${JSON.stringify(line)} (have ${JSON.stringify(text)})`);
          await sleep(20);
        }
      },
    }));
  });
}

const counter = async (envoy: EnvoyProcess, name: string) => (await envoy.stats()).get(`wasmcustom.passthrough_mtls.${name}`) ?? 0;
const dialHttpbin = () => exchange(HTTPBIN.host, HTTPBIN.port, "new connection", 10_000, CLIENT_IP);

/** The Wasm module file(s) of the ECDS filter `name` in Envoy's config dump. */
async function ecdsModules(envoy: EnvoyProcess, name: string): Promise<string[]> {
  const dump = JSON.parse(await envoy.admin("/config_dump?resource=ecds_filters"));
  return (dump.configs ?? [])
    .map((c: any) => c.ecds_filter)
    .filter((f: any) => f?.name === name)
    .map((f: any) => f.typed_config?.config?.vm_config?.code?.local?.filename);
}

for (const { era, label } of ERAS) {
  describe(`upgrades in the real Envoy, istiod ${label}`, { concurrency: false }, () => {
    const modules = readUpgradeModules();
    let certs: MeshCerts;
    let net: { release(): void };
    let httpbin: TlsPod;

    before(async () => {
      certs = await meshCerts();
      net = meshNetwork();
      httpbin = await startTlsPod("httpbin", HTTPBIN.host, HTTPBIN.port, certs.dir, "httpbin");
    });

    after(async () => {
      net?.release();
      if (httpbin) await closeWithin([httpbin]);
    });

    it("a canary sidecar takes only the canary plugin, loads the new module and sends pod traffic through it over Istio mTLS", async () => {
      const s = await sidecar(upgradeDump(era, "B-canary", "client-canary"), certs, `up-canary-${era}`);
      try {
        assert.deepEqual([...s.translation.files.ecds.keys()], [CANARY]);
        assert.deepEqual(s.translation.unserved, []);
        assert.deepEqual(await ecdsModules(s.envoy, CANARY), [modules.new.file]);
        const reply = await dialHttpbin();
        assert.equal(reply.received.toString(), `httpbin peer=${SLEEP}\nnew connection`);
        assert.equal(await counter(s.envoy, "mtls"), 1);
      } finally {
        await s.envoy.stop();
      }
    });

    it("route A canary: the same istiod output, the pod mounting the new module: Envoy loads the module from the mount and sends pod traffic through it", async () => {
      const mount = join(UPGRADE_DIR, "route-a-canary-mount");
      const s = await sidecar(loadDump(era, "passthrough_mtls", "A"), certs, `up-a-canary-${era}`, mount);
      try {
        const listeners = await s.envoy.admin("/config_dump?resource=dynamic_listeners");
        assert.ok(listeners.includes(`"filename": "${join(mount, "passthrough_mtls.wasm")}"`), "the listener does not load the mounted module");
        assert.ok(!listeners.includes(`"filename": "${join(REPO_ROOT, "build", "passthrough_mtls.wasm")}"`));
        assert.equal(readFileSync(join(mount, "passthrough_mtls.wasm")).equals(readFileSync(modules.new.file)), true);
        const reply = await dialHttpbin();
        assert.equal(reply.received.toString(), `httpbin peer=${SLEEP}\nnew connection`);
        assert.equal(await counter(s.envoy, "mtls"), 1);
      } finally {
        await s.envoy.stop();
      }
    });

    it("route B, the promotion's ECDS update: an open connection keeps going past the drain time; new connections run the new module", async (t) => {
      const s = await sidecar(upgradeDump(era, "B-canary"), certs, `up-ecds-${era}`);
      let held: Held | undefined;
      try {
        assert.deepEqual(await ecdsModules(s.envoy, MAIN), [modules.old.file]);
        held = await hold(HTTPBIN.host, HTTPBIN.port);
        await held.roundTrip("before the update\n");
        const vmsBefore = (await s.envoy.stats()).get("wasm.envoy.wasm.runtime.v8.created") ?? 0;
        const activeBefore = (await s.envoy.stats()).get("wasm.envoy.wasm.runtime.v8.active") ?? 0;
        const lds = (await s.envoy.stats()).get("listener_manager.lds.update_success");

        const next = translateFor(upgradeDump(era, "B-promoted"), certs, "sleep", { ecds: "ecdsAgent", name: `up-ecds-${era}-next` });
        pushFile(next.files.ecds.get(MAIN)!, s.translation.files.ecds.get(MAIN)!, "2");
        for (let i = 0; i < 100 && (await ecdsModules(s.envoy, MAIN))[0] !== modules.new.file; i++) await sleep(100);
        assert.deepEqual(await ecdsModules(s.envoy, MAIN), [modules.new.file]);
        // A new VM for the new module; no listener update.
        assert.ok(((await s.envoy.stats()).get("wasm.envoy.wasm.runtime.v8.created") ?? 0) > vmsBefore, "no VM created for the new module");
        assert.equal((await s.envoy.stats()).get("listener_manager.lds.update_success"), lds);

        const reply = await dialHttpbin();
        assert.equal(reply.received.toString(), `httpbin peer=${SLEEP}\nnew connection`);
        assert.equal(await counter(s.envoy, "mtls"), 2, "the new connection went through the (new) filter");

        // Well past the drain time: the old connection is still open and carries bytes.
        await sleep((DRAIN_TIME_S + 2) * 1000);
        await held.roundTrip("after the update\n");
        assert.equal(held.received(), `httpbin peer=${SLEEP}\nbefore the update\nafter the update\n`);

        // The old connection holds the old module's VMs: more VMs are alive while it is open than
        // before the update, and they go when it closes (Envoy frees a VM with its last user).
        const active = async () => (await s.envoy.stats()).get("wasm.envoy.wasm.runtime.v8.active") ?? 0;
        const activeWhileOpen = await active();
        held.socket.destroy();
        let activeAfterClose = await active();
        for (let i = 0; i < 100 && activeAfterClose !== activeBefore; i++) {
          await sleep(100);
          activeAfterClose = await active();
        }
        t.diagnostic(`v8 VMs active: ${activeBefore} before the update, ${activeWhileOpen} after it with the old connection open, ${activeAfterClose} once it closed`);
        assert.ok(activeWhileOpen > activeBefore, `no more VMs alive with the old connection open (${activeWhileOpen} vs ${activeBefore})`);
        assert.equal(activeAfterClose, activeBefore, "the old module's VMs outlived the old connection");
      } finally {
        held?.socket.destroy();
        await s.envoy.stop();
      }
    });

    it("route A, a listener update (the snapshot changed): new connections take the new listener; an open connection on the changed chain is closed when the drain time ends", async (t) => {
      const s = await sidecar(loadDump(era, "passthrough_mtls", "A"), certs, `up-lds-${era}`);
      let held: Held | undefined;
      try {
        held = await hold(HTTPBIN.host, HTTPBIN.port);
        await held.roundTrip("before the update\n");
        const lds = (await s.envoy.stats()).get("listener_manager.lds.update_success") ?? 0;

        const next = translateFor(upgradeDump(era, "A-next"), certs, "sleep", { ecds: "ecdsAgent", name: `up-lds-${era}-next` });
        const pushed = Date.now();
        pushFile(next.files.lds, s.translation.files.lds, "2");
        const stats = await s.envoy.waitForStats((m) => (m.get("listener_manager.lds.update_success") ?? 0) > lds, 10_000);
        assert.equal(stats.get("listener_manager.lds.update_rejected") ?? 0, 0);

        // During the drain the old connection still carries bytes.
        await held.roundTrip("during the drain\n");
        const reply = await dialHttpbin();
        assert.equal(reply.received.toString(), `httpbin peer=${SLEEP}\nnew connection`);

        // The old connection is closed by Envoy, not by either end, once the drain time is over.
        const closedAt = await Promise.race([held.closed, sleep(30_000).then(() => 0)]);
        assert.ok(closedAt > 0, "the open connection was not closed within 30 s of the listener update");
        const afterS = (closedAt - pushed) / 1000;
        t.diagnostic(`the open connection was closed ${afterS.toFixed(1)} s after the listener update (drain time ${DRAIN_TIME_S} s)`);
        assert.ok(afterS >= DRAIN_TIME_S * 0.5, `closed ${afterS.toFixed(1)} s after the update: before the drain time`);
        assert.equal(held.received(), `httpbin peer=${SLEEP}\nbefore the update\nduring the drain\n`);
      } finally {
        held?.socket.destroy();
        await s.envoy.stop();
      }
    });
  });
}
