// Bulk writes for populating the bench's mesh. The harness's client (@kubernetes/client-node)
// builds a new https.Agent for every request (KubeConfig.applyToHTTPSOptions), so each call
// parses the CA, key and certificate again and opens a new TLS connection with a client-cert
// handshake: ~7-8 ms of client CPU per request, which held population to ~50 pods/s however many
// requests were in flight. This sends the same harness-built objects (server-side apply, and the
// status subresource as a kubelet would) over one pool of kept-alive TLS connections.
import { Agent, request } from "node:https";
import { HARNESS_FIELD_MANAGER, podObject, podStatus, type KubeCluster, type PodInput, type PodStatusInput } from "../../tests/support/kube.js";
import type { KubernetesObject } from "@kubernetes/client-node";

export class BulkWriter {
  private constructor(
    private readonly server: URL,
    private readonly agent: Agent,
  ) {}

  /** Credentials from the cluster's admin kubeconfig; `sockets` bounds the connections (and so the requests in flight). */
  static async forCluster(cluster: KubeCluster, sockets: number): Promise<BulkWriter> {
    const tls: { ca?: unknown; cert?: unknown; key?: unknown } = {};
    await cluster.kubeConfig.applyToHTTPSOptions(tls);
    const agent = new Agent({ keepAlive: true, maxSockets: sockets, ca: tls.ca as string, cert: tls.cert as string, key: tls.key as string });
    return new BulkWriter(new URL(cluster.server), agent);
  }

  close(): void {
    this.agent.destroy();
  }

  /** Server-side apply of a namespaced core or discovery object (Pod, Service, EndpointSlice). */
  apply(object: KubernetesObject): Promise<void> {
    const namespace = object.metadata?.namespace ?? "default";
    const name = object.metadata?.name ?? "";
    const group = object.apiVersion === "v1" ? "/api/v1" : `/apis/${object.apiVersion}`;
    const plural = `${(object.kind ?? "").toLowerCase()}s`;
    return this.send("PATCH", `${group}/namespaces/${namespace}/${plural}/${name}?fieldManager=${HARNESS_FIELD_MANAGER}&force=true`, "application/apply-patch+yaml", object);
  }

  /**
   * A plain create (POST), not apply: the API server does no field-ownership merge for it, which
   * makes it the cheaper write when the object is new (a conflict is an error, as it should be in
   * a freshly started cluster).
   */
  createPod(input: PodInput): Promise<void> {
    return this.send("POST", `/api/v1/namespaces/${input.namespace}/pods?fieldManager=${HARNESS_FIELD_MANAGER}`, "application/json", podObject(input));
  }

  /** As KubeCluster.setPodStatus: the whole status through the status subresource (merge patch). */
  setPodStatus(namespace: string, name: string, input: PodStatusInput): Promise<void> {
    return this.send("PATCH", `/api/v1/namespaces/${namespace}/pods/${name}/status?fieldManager=${HARNESS_FIELD_MANAGER}`, "application/merge-patch+json", { status: podStatus(input) });
  }

  /**
   * Opens `connections` kept-alive connections (one GET each, all at once) before a timed phase.
   * The pool sits idle for minutes between phases and its connections do not outlive that; a
   * new one costs the writer a TLS handshake with its client certificate (bench/feed/FANOUT.md:
   * 32 of them, 81 ms of CPU at 100k), which would be paid inside the timed writes. A kubelet's
   * or a controller's connection to the API server is long-lived.
   */
  async warm(connections: number, namespace: string): Promise<void> {
    await Promise.all(Array.from({ length: connections }, () => this.send("GET", `/api/v1/namespaces/${namespace}`, undefined, undefined)));
  }

  private send(method: string, path: string, contentType: string | undefined, body: unknown): Promise<void> {
    const payload = body === undefined ? "" : JSON.stringify(body);
    const headers: Record<string, string | number> = { Accept: "application/json", "Content-Length": Buffer.byteLength(payload) };
    if (contentType !== undefined) headers["Content-Type"] = contentType;
    return new Promise((resolve, reject) => {
      const req = request(
        { host: this.server.hostname, port: this.server.port, method, path, agent: this.agent, headers },
        (res) => {
          const chunks: Buffer[] = [];
          res.on("data", (chunk: Buffer) => chunks.push(chunk));
          res.on("end", () => {
            const status = res.statusCode ?? 0;
            if (status >= 200 && status < 300) resolve();
            else reject(new Error(`${method} ${path}: HTTP ${status}: ${Buffer.concat(chunks).toString().slice(0, 300)}`));
          });
          res.on("error", reject);
        },
      );
      req.on("error", reject);
      req.end(payload);
    });
  }
}
