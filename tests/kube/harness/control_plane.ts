// Starts and waits for the control-plane processes of one cluster: etcd, kube-apiserver and
// (optionally) kube-controller-manager, each on free loopback ports, under the guard of
// process.ts. tests/support/kube.ts puts them together into a KubeCluster.
import { rmSync } from "node:fs";
import { request } from "node:https";
import { join } from "node:path";
import { freePort } from "../../support/ports.js";
import type { ClientCredentials, ClusterPki } from "./pki.js";
import { GuardedProcess } from "./process.js";

/** Service ClusterIPs are allocated from here. */
export const SERVICE_CIDR = "10.96.0.0/16";

export function sleep(ms: number): Promise<void> {
  return new Promise((done) => setTimeout(done, ms));
}

/** Status code and body of a GET, or an error message when there is no answer. */
function getHttps(url: string, tls: { ca?: string; cert?: string; key?: string; rejectUnauthorized?: boolean }): Promise<{ status: number; body: string }> {
  return new Promise((done, fail) => {
    const req = request(url, { ...tls, timeout: 5000 }, (res) => {
      let body = "";
      res.setEncoding("utf8");
      res.on("data", (chunk) => (body += chunk));
      res.on("end", () => done({ status: res.statusCode ?? 0, body }));
    });
    req.on("timeout", () => req.destroy(new Error("timeout")));
    req.on("error", fail);
    req.end();
  });
}

async function httpGet(url: string): Promise<{ status: number; body: string }> {
  const response = await fetch(url, { signal: AbortSignal.timeout(5000) });
  return { status: response.status, body: await response.text() };
}

async function waitUntil(what: string, child: GuardedProcess, timeoutMs: number, check: () => Promise<string | true>): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = "no answer yet";
  while (Date.now() < deadline) {
    if (child.exited) throw new Error(`kube harness: ${what}: ${child.name} ${child.exitDescription}\n${child.logTail()}`);
    try {
      const result = await check();
      if (result === true) return;
      last = result;
    } catch (error) {
      last = (error as Error).message;
    }
    await sleep(200);
  }
  throw new Error(`kube harness: ${what} not within ${timeoutMs} ms (last: ${last})\n${child.logTail()}`);
}

const BIND_RACE = /address already in use/;

async function withPortRetry<T>(attempt: () => Promise<T>): Promise<T> {
  // freePort() hands out a port that another process can take before we bind it; retry then.
  for (let tries = 1; ; tries++) {
    try {
      return await attempt();
    } catch (error) {
      if (tries >= 3 || !BIND_RACE.test((error as Error).message)) throw error;
    }
  }
}

export async function startEtcd(binary: string, dir: string, options: { maxRequestBytes?: number }, timeoutMs: number): Promise<{ process: GuardedProcess; url: string }> {
  return withPortRetry(async () => {
    const [clientPort, peerPort] = [await freePort(), await freePort()];
    const url = `http://127.0.0.1:${clientPort}`;
    const peer = `http://127.0.0.1:${peerPort}`;
    const dataDir = join(dir, "etcd");
    rmSync(dataDir, { recursive: true, force: true });
    const args = [
      "--name=harness",
      `--data-dir=${dataDir}`,
      `--listen-client-urls=${url}`,
      `--advertise-client-urls=${url}`,
      `--listen-peer-urls=${peer}`,
      `--initial-advertise-peer-urls=${peer}`,
      `--initial-cluster=harness=${peer}`,
      "--initial-cluster-state=new",
      "--logger=zap",
      "--log-level=warn",
    ];
    if (options.maxRequestBytes !== undefined) args.push(`--max-request-bytes=${options.maxRequestBytes}`);
    const etcd = GuardedProcess.start("etcd", binary, args, join(dir, "etcd.log"), dir);
    try {
      await waitUntil("etcd healthy", etcd, timeoutMs, async () => {
        const { status, body } = await httpGet(`${url}/health`);
        return status === 200 && body.includes('"true"') ? true : `${status} ${body}`;
      });
    } catch (error) {
      await etcd.stop();
      throw error;
    }
    return { process: etcd, url };
  });
}

export async function startApiserver(
  binary: string,
  dir: string,
  pki: ClusterPki,
  admin: ClientCredentials,
  etcdUrl: string,
  extraArgs: readonly string[],
  timeoutMs: number,
): Promise<{ process: GuardedProcess; port: number }> {
  return withPortRetry(async () => {
    const port = await freePort();
    const args = [
      `--etcd-servers=${etcdUrl}`,
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      // The endpoints of the `kubernetes` service would otherwise be reconciled to this address.
      "--advertise-address=127.0.0.1",
      "--endpoint-reconciler-type=none",
      `--cert-dir=${join(dir, "apiserver-certs")}`,
      `--tls-cert-file=${pki.servingCertPath}`,
      `--tls-private-key-file=${pki.servingKeyPath}`,
      `--client-ca-file=${pki.caPath}`,
      "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
      `--service-account-key-file=${pki.serviceAccountPublicKeyPath}`,
      `--service-account-signing-key-file=${pki.serviceAccountSigningKeyPath}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      // RBAC, so a least-privilege ClusterRole is really enforced; the harness's admin is
      // system:masters and passes regardless.
      "--authorization-mode=RBAC",
      // No controller creates the `default` ServiceAccount, so this plugin would refuse every pod.
      "--disable-admission-plugins=ServiceAccount",
      "--allow-privileged=true",
      "--profiling=false",
      "--v=1",
      ...extraArgs,
    ];
    const apiserver = GuardedProcess.start("kube-apiserver", binary, args, join(dir, "kube-apiserver.log"), dir);
    try {
      const tls = { ca: pki.ca, cert: admin.cert, key: admin.key };
      await waitUntil("kube-apiserver /readyz", apiserver, timeoutMs, async () => {
        const { status, body } = await getHttps(`https://127.0.0.1:${port}/readyz`, tls);
        return status === 200 ? true : `${status} ${body.split("\n").filter((line) => line.includes("failed")).join("; ")}`;
      });
    } catch (error) {
      await apiserver.stop();
      throw error;
    }
    return { process: apiserver, port };
  });
}

export async function startControllerManager(
  binary: string,
  dir: string,
  kubeconfigPath: string,
  pki: ClusterPki,
  controllers: readonly string[],
  timeoutMs: number,
): Promise<GuardedProcess> {
  return withPortRetry(async () => {
    const port = await freePort();
    const args = [
      `--kubeconfig=${kubeconfigPath}`,
      // Delegated authn/authz of its own endpoint; /healthz is always allowed.
      `--authentication-kubeconfig=${kubeconfigPath}`,
      `--authorization-kubeconfig=${kubeconfigPath}`,
      `--controllers=${controllers.join(",")}`,
      "--leader-elect=false",
      "--bind-address=127.0.0.1",
      `--secure-port=${port}`,
      `--cert-dir=${join(dir, "controller-manager-certs")}`,
      `--service-account-private-key-file=${pki.serviceAccountSigningKeyPath}`,
      `--root-ca-file=${pki.caPath}`,
      `--service-cluster-ip-range=${SERVICE_CIDR}`,
      "--v=1",
    ];
    const manager = GuardedProcess.start("kube-controller-manager", binary, args, join(dir, "kube-controller-manager.log"), dir);
    try {
      // Its serving certificate is self-signed (in --cert-dir); only liveness is asked here.
      await waitUntil("kube-controller-manager /healthz", manager, timeoutMs, async () => {
        const { status, body } = await getHttps(`https://127.0.0.1:${port}/healthz`, { rejectUnauthorized: false });
        return status === 200 ? true : `${status} ${body}`;
      });
    } catch (error) {
      await manager.stop();
      throw error;
    }
    return manager;
  });
}
