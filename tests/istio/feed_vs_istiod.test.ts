// The feed's mesh model (feed/src/compute.ts + view.ts, net1's view) against what istiod's own
// code computes for the same Kubernetes objects (tests/istiodview/mesh.yaml): its ambient index
// (the Workloads and Services ztunnel receives) and its sidecar registry (the Services and
// IstioEndpoints EDS is built from), dumped per Istio era by tests/istio/common/istiod_view_test.go
// (scripts/istio-gen.sh). Every field the model has is compared with every istiod source that
// has it; every difference must be one of KNOWN below, with its reason, and every KNOWN one must
// still occur: a new difference, or a listed one that disappears, fails the test.
// feed/README.md "Compared with istiod" lists the same table.
import assert from "node:assert/strict";
import { describe, it } from "node:test";
import { compare, describe as describeDifference, type Difference, feedSide, loadIstiodView } from "../istiodview/compare.js";
import { ERAS } from "./dump.js";

interface Known {
  source: Difference["source"];
  field: string;
  /** The objects it occurs on (workload "ns/pod", service "name.ns", endpoint "name.ns|ns/pod"). */
  objects: string[];
  /** Why the two differ, and which side the filters need. */
  reason: string;
}

const SIDECAR_PODS = ["data/postgres-0", "data/postgres-1", "default/far-0", "default/httpbin-0", "default/httpbin-1", "default/ratings-0", "default/reviews-0", "default/reviews-1", "default/reviews-2", "default/sleep-0", "far/edge-0", "shop/cart-0", "shop/cart-1"];

export const KNOWN: Known[] = [
  {
    source: "ambient",
    field: "tlsMode",
    objects: SIDECAR_PODS,
    reason:
      "the ambient index marks a sidecar pod as taking Istio mTLS (tunnel protocol LEGACY_ISTIO_MTLS) only with FeatureFlags.EnableMtlsTransportProtocol, which istiod's own index never sets (only the agentgateway controller's index does); ztunnel does not need it. The filters serve sidecars, so tlsMode follows the sidecar registry's rule (label security.istio.io/tlsMode=istio), which agrees with the feed on every endpoint",
  },
  {
    source: "ambient",
    field: "tlsMode",
    objects: ["NetworkGateway/net2/172.18.0.10/15008"],
    reason:
      "istiod's gateway workload (convertGateway) has no tunnel protocol: ztunnel always reaches a network gateway by double HBONE through the networkGateway reference. The model gives the gateway's own workload tlsMode istio, so a filter that dials the gateway's address directly uses Istio mTLS with the gateway's identity",
  },
  {
    source: "sidecar",
    field: "network",
    objects: ["far.default|default/far-0"],
    reason:
      "far-0 carries topology.istio.io/network: net2. The sidecar registry reads a pod's own label first (Controller.Network); the ambient index puts every pod of a cluster on the cluster's network (podWorkloadBuilder: networkGetter, the system namespace's label) and ignores the label, and the feed does the same: anyone who can create a pod can set that label, and on another network the pod's address would compete with that network's pods (docs/problems.md, the feed's rules)",
  },
  {
    source: "ambient",
    field: "locality",
    objects: ["default/httpbin-1"],
    reason:
      "the ambient index takes locality from the node only (getPodLocality → nodeLocality); the sidecar registry's getPodLocality lets the pod's istio-locality label win, and agrees with the feed (eu-west1/eu-west1-a/rack9)",
  },
  {
    source: "ambient",
    field: "healthy",
    objects: ["default/reviews-1"],
    reason:
      "the ambient index takes health from the pod only (Ready and not deleting); the sidecar registry takes each endpoint's EndpointSlice condition (ready: false here, the pod Ready), and agrees with the feed: not healthy",
  },
  {
    source: "ambient",
    field: "identity",
    objects: ["default/legacy-0"],
    reason:
      "legacy-0 has no spec.serviceAccountName: a real API server's ServiceAccount admission plugin sets `default` (the feed's rule), the fake client istiod's harness uses has no admission, so istiod sees an empty service account and no identity",
  },
  {
    source: "ambient",
    field: "present",
    objects: ["kube-system/node-exporter-x"],
    reason:
      "a host-network pod: istiod's ambient index keeps it (NetworkMode HOST_NETWORK: the node's IP, shared by every host-network pod); the model has no such flag and one workload per address, so the feed leaves it out and counts it (feed_model_gaps)",
  },
  {
    source: "ambient",
    field: "present",
    objects: ["NetworkGateway/net1/172.18.0.5/15008"],
    reason:
      "an istio-east-west Gateway in istiod's own cluster is that cluster's ingress for other networks, not a network gateway to it (localK8sGatewayToNetworkGateways takes only istio-remote there; remoteK8sGatewayToNetworkGateways takes istio-east-west from remote clusters). The feed has no local cluster: it reads every cluster as the other clusters' istiods do, so it makes net1's east-west gateway the gateway of net1 (used only in other networks' views)",
  },
  {
    source: "ambient",
    field: "subjectAltNames",
    objects: ["cart.shop", "far.default", "httpbin.default", "postgres.data", "ratings.default", "reviews.default", "waypoint.shop"],
    reason:
      "the ambient Service carries subject alt names only from a ServiceEntry's subjectAltNames; ztunnel verifies each endpoint workload's own identity. The model lists the service's identities (its endpoints' and the alpha.istio.io service-account annotations), as the sidecar registry does for a sidecar's cluster SANs, and that agrees",
  },
  {
    source: "sidecar",
    field: "locality",
    objects: ["cart.shop|shop/cart-1", "far.default|default/far-0", "postgres.data|data/postgres-0", "postgres.data|data/postgres-1"],
    reason:
      "a node with region and zone but no subzone: the sidecar registry's locality label keeps the empty part (us-east1/us-east1-c/), the model's locality has no empty part and is cut there (us-east1/us-east1-c); the ambient index has no subzone either, and agrees with the feed",
  },
];

function key(source: string, object: string, field: string): string {
  return `${source} ${object} ${field}`;
}

describe("feed vs istiod: the same objects, the same model", () => {
  const feed = feedSide();
  for (const { era, label } of ERAS) {
    it(`istiod ${label}: every difference is a known one, and every known one occurs`, () => {
      const diffs = compare(feed, loadIstiodView(era));
      const expected = new Map<string, Known>();
      for (const k of KNOWN) for (const o of k.objects) expected.set(key(k.source, o, k.field), k);
      const seen = new Set<string>();
      const unexpected: string[] = [];
      for (const d of diffs) {
        const k = key(d.source, d.object, d.field);
        if (expected.has(k)) seen.add(k);
        else unexpected.push(describeDifference(d));
      }
      const gone = [...expected.keys()].filter((k) => !seen.has(k));
      assert.deepEqual({ unexpected, gone }, { unexpected: [], gone: [] }, `istiod ${era}:\n${diffs.map(describeDifference).join("\n")}`);
    });
  }
});
