// Configuration footprint: plugin-configuration bytes per pod against what the same pods cost
// in Envoy configuration without the filter.
// - passthrough_mtls replaces the per-pod listeners Istio builds for every (pod, port) of a
//   headless service (modelled in lib/istio_listener.ts, a lower bound); that comparison is
//   emitted per headless pod, and as totals for the whole snapshot.
// - tunnel_port and waypoint_route replace no per-pod listener: without them the target port
//   travels in per-endpoint EDS data the control plane sends anyway (or through metadata
//   exchange, which problem 2 rules out), and sidecars have no listener form of double HBONE at
//   all. Their plugin bytes are an addition, not a replacement, so the figure carries
//   `applies: false` and the reason instead of a made-up comparison.
import { emit } from "../emit.js";
import { istioHeadlessListenerSize } from "../lib/istio_listener.js";
import type { Snapshot } from "../lib/mesh_snapshot.js";
import type { Subject } from "./subjects.js";
import { round } from "./vm.js";

const NOT_APPLICABLE: Readonly<Record<string, string>> = {
  tunnel_port_client:
    "the target port otherwise rides on per-endpoint EDS data that is sent anyway (or on metadata exchange, ruled out by problem 2), so these bytes come on top",
  tunnel_port_server: "the server checks only its own pod's ports; these bytes come on top of the inbound listeners Istio builds anyway",
  waypoint_route: "sidecars have no listener form of double HBONE through an east-west gateway to compare with; these bytes come on top",
};

export function footprint(subject: Subject, snapshot: Snapshot): void {
  const { pods, headlessMembers } = snapshot;
  const pluginBytes = snapshot.config.length;
  const pluginPerPod = pluginBytes / pods;
  if (subject.name !== "passthrough_mtls") {
    emit({
      figure: "config_footprint",
      filter: subject.name,
      pods,
      plugin_bytes_per_pod: round(pluginPerPod, 1),
      listener_bytes_per_pod: null,
      ratio: null,
      applies: false,
      reason: NOT_APPLICABLE[subject.name] ?? "no per-pod listener model for this filter",
    });
    return;
  }
  // Sample up to ~2,000 members: listener sizes differ only by the lengths of IP and hostname.
  const step = Math.max(1, Math.floor(headlessMembers.length / 2_000));
  let proto = 0;
  let json = 0;
  let sampled = 0;
  for (let i = 0; i < headlessMembers.length; i += step) {
    const m = headlessMembers[i]!;
    const size = istioHeadlessListenerSize(m.ip, m.port, m.hostname);
    proto += size.protoBytes;
    json += size.jsonBytes;
    sampled++;
  }
  const listenerPerPod = proto / sampled;
  emit({
    figure: "config_footprint",
    filter: subject.name,
    pods,
    plugin_bytes_per_pod: round(pluginPerPod, 1),
    listener_bytes_per_pod: round(listenerPerPod, 1),
    listener_json_bytes_per_pod: round(json / sampled, 1),
    ratio: round(listenerPerPod / pluginPerPod, 2),
    applies: true,
    headless_pods: headlessMembers.length,
    plugin_bytes_total: pluginBytes,
    listener_bytes_total: Math.round(listenerPerPod * headlessMembers.length),
    model: "per headless pod: Istio's lean TCP listener, protobuf, lower bound (bench/lib/istio_listener.ts); plugin: JSON per workload entry",
  });
}
