// Server-side apply of an object exactly as written. KubernetesObjectApi.patch() first runs the
// body through client-node's typed serializer, which keeps only the fields its (older) models know
// under their TypeScript names: a CRD loses `x-kubernetes-int-or-string`, `$ref`, `default` and
// `enum` (the API server then refuses it), and any field newer than the models disappears. This
// sends the JSON unchanged; the answer is still deserialized like every typed call's.
import { HttpMethod, KubeConfig, KubernetesObjectApi, PatchStrategy, type KubernetesObject } from "@kubernetes/client-node";

export class RawApplyApi extends KubernetesObjectApi {
  static forConfig(kubeConfig: KubeConfig): RawApplyApi {
    return kubeConfig.makeApiClient(RawApplyApi);
  }

  async apply<T extends KubernetesObject>(object: T, fieldManager: string): Promise<T> {
    const path = await this.specUriPath(object, "patch");
    const request = this.configuration.baseServer.makeRequestContext(path, HttpMethod.PATCH);
    request.setHeaderParam("Accept", "application/json");
    request.setHeaderParam("Content-Type", PatchStrategy.ServerSideApply);
    request.setQueryParam("fieldManager", fieldManager);
    request.setQueryParam("force", "true");
    // JSON is YAML, which is what application/apply-patch+yaml takes.
    request.setBody(JSON.stringify(object));
    return this.requestPromise<T>(request);
  }
}
