// What the preflight knows of Istio and Kubernetes releases: how istiod names a WasmPlugin's
// ECDS resource by its version (istio/README.md, "Route B and the ECDS name, by version"; run
// for 1.30 and 1.31, read in 1.29.6's source), and the Kubernetes range the suite supports.

export interface Version {
  readonly major: number;
  readonly minor: number;
  /** As found (an image tag such as 1.31.2 or 1.31.2-distroless). */
  readonly text: string;
}

/** `1.31.2`, `1.31.2-distroless`, `v1.36.3`, `1.30-dev` → major.minor; undefined when it is not a version. */
export function parseVersion(text: string): Version | undefined {
  const m = /^v?(\d+)\.(\d+)(?:[.-].*)?$/.exec(text);
  return m ? { major: Number(m[1]), minor: Number(m[2]), text } : undefined;
}

/** The version an image reference carries in its tag (`docker.io/istio/proxyv2:1.31.2`). */
export function imageVersion(image: string): Version | undefined {
  const tag = image.includes("@") ? undefined : image.slice(image.lastIndexOf(":") + 1);
  return tag && !tag.includes("/") ? parseVersion(tag) : undefined;
}

/** The ECDS name istiod of `version` serves WasmPlugin `namespace/name` under. */
export function servedEcdsName(version: Version, namespace: string, name: string): string {
  const translated = version.major > 1 || version.minor >= 30;
  return translated
    ? `extensions.istio.io/trafficextension/${namespace}.${name}~istio-translated-wasmplugin`
    : `extensions.istio.io/wasmplugin/${namespace}.${name}`;
}

/** The WasmPlugin an ECDS name refers to, in either naming. */
export function pluginOfEcdsName(ecdsName: string): { namespace: string; name: string } | undefined {
  const m = /^extensions\.istio\.io\/(?:wasmplugin|trafficextension)\/([^.]+)\.([^~]+)(?:~istio-translated-wasmplugin)?$/.exec(ecdsName);
  return m ? { namespace: m[1]!, name: m[2]! } : undefined;
}

/**
 * Kubernetes: the feed reads discovery.k8s.io/v1 EndpointSlices (served since 1.21) and the suite
 * is tested against a real kube-apiserver of this version (scripts/kube-setup.sh). Istio's own
 * support range for the installed release applies on top of it.
 */
export const KUBERNETES_TESTED = "1.36.3";
export const KUBERNETES_MIN = { major: 1, minor: 21 } as const;
