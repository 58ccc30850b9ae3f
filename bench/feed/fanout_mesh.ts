// The fan-out bench's mesh: N pods with IPs and the sidecar label, in services of 100 endpoints
// (EndpointSlices as the controller writes them, 1,000 service accounts), as in run.ts, plus
// the churned pods. The N pods go either through the real API server (`apiserver`: created,
// then their status written as a kubelet writes it, 64 requests in flight, writer.ts) or into
// the feed's file source (`files`: the same objects from the same builders, status included,
// read into the same per-cluster store the informers fill; tests/feed/file_vs_apiserver.test.ts
// shows both give the same model). The churned pods are always in the API server: every change
// the bench measures is an API write.
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { endpointSliceObject, podObject, podStatus, serviceObject, type KubeCluster } from "../../tests/support/kube.js";
import type { BulkWriter } from "./writer.js";

const ENDPOINTS_PER_SERVICE = 100;
const NAMESPACE = "bench";
export const CHURN_NAMESPACE = "churn";
const WRITERS = 64;
/** Pods per file: ~5 MB of JSON, well under the file source's 16 MiB per file. */
const PODS_PER_FILE = 5000;

function podIp(i: number): string {
  return `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;
}

/** The address the churn write `w` gives its pod: a new one per write (172.16.0.0/12), so a record names its write. */
export function churnIp(w: number): string {
  return `172.${16 + ((w >> 16) & 15)}.${(w >> 8) & 255}.${w & 255}`;
}

export function churnPod(w: number, churnPods: number): string {
  return `c-${w % churnPods}`;
}

const POD_LABELS = (i: number) => ({ app: `s-${Math.floor(i / ENDPOINTS_PER_SERVICE)}`, "security.istio.io/tlsMode": "istio" });
const POD = (i: number) => podObject({ namespace: NAMESPACE, name: `p-${i}`, labels: POD_LABELS(i), serviceAccountName: `sa-${i % 1000}` });

function serviceOf(s: number) {
  return serviceObject({ namespace: NAMESPACE, name: `s-${s}`, selector: { app: `s-${s}` }, ports: [{ name: "http", port: 80, targetPort: 8080 }] });
}

function sliceOf(s: number, pods: number) {
  const endpoints = [];
  for (let i = s * ENDPOINTS_PER_SERVICE; i < Math.min(pods, (s + 1) * ENDPOINTS_PER_SERVICE); i++) endpoints.push({ addresses: [podIp(i + 256)], pod: { name: `p-${i}` } });
  return endpointSliceObject({ namespace: NAMESPACE, name: `s-${s}-1`, service: `s-${s}`, ports: [{ name: "http", port: 8080 }], endpoints });
}

/** Writes the N pods, their services and slices into `dir` for the file source; seconds taken. */
export function writeMeshFiles(dir: string, pods: number): number {
  const started = performance.now();
  mkdirSync(dir, { recursive: true });
  const items: unknown[] = [{ apiVersion: "v1", kind: "Namespace", metadata: { name: NAMESPACE } }];
  for (let i = 0; i < pods; i++) {
    items.push({ ...POD(i), status: podStatus({ podIP: podIp(i + 256) }) });
    const s = Math.floor(i / ENDPOINTS_PER_SERVICE);
    // A service's cluster IP as the API server would allocate one (10.96.0.0/16).
    if ((i + 1) % ENDPOINTS_PER_SERVICE === 0 || i === pods - 1) {
      const service = serviceOf(s);
      service.spec = { ...service.spec, clusterIP: `10.96.${(s >> 8) & 255}.${s & 255}` };
      items.push(service, sliceOf(s, pods));
    }
    if ((i + 1) % PODS_PER_FILE === 0 || i === pods - 1) {
      writeFileSync(join(dir, `mesh-${Math.floor(i / PODS_PER_FILE)}.json`), JSON.stringify({ apiVersion: "v1", kind: "List", items }));
      items.length = 0;
    }
  }
  return (performance.now() - started) / 1000;
}

/** Runs `job(i)` for i < count with at most `width` in flight. */
async function pool(count: number, width: number, job: (i: number) => Promise<void>): Promise<void> {
  let next = 0;
  await Promise.all(Array.from({ length: width }, async () => {
    while (next < count) await job(next++);
  }));
}

/** Writes the N pods, their services and slices through the API server; seconds taken. */
export async function populateApiserver(cluster: KubeCluster, writer: BulkWriter, pods: number): Promise<number> {
  const started = performance.now();
  await cluster.createNamespace(NAMESPACE);
  await pool(pods, WRITERS, async (i) => {
    await writer.createPod({ namespace: NAMESPACE, name: `p-${i}`, labels: POD_LABELS(i), serviceAccountName: `sa-${i % 1000}` });
    await writer.setPodStatus(NAMESPACE, `p-${i}`, { podIP: podIp(i + 256) });
  });
  await pool(Math.ceil(pods / ENDPOINTS_PER_SERVICE), WRITERS, async (s) => {
    await writer.apply(serviceOf(s));
    await writer.apply(sliceOf(s, pods));
  });
  return (performance.now() - started) / 1000;
}

/** The churned pods, in the mesh at addresses churnIp(0..n-1) (in no service: one workload record per change). */
export async function createChurnPods(cluster: KubeCluster, writer: BulkWriter, n: number): Promise<void> {
  await cluster.createNamespace(CHURN_NAMESPACE);
  await pool(n, 16, async (i) => {
    await writer.createPod({ namespace: CHURN_NAMESPACE, name: churnPod(i, n), labels: { "security.istio.io/tlsMode": "istio" }, serviceAccountName: "churn" });
    await writer.setPodStatus(CHURN_NAMESPACE, churnPod(i, n), { podIP: churnIp(i) });
  });
}
