// The `decision` object of `npm run explain`: what Envoy will do with the connection, in words,
// derived only from what the filter did (its filter-state writes, set_property values, the
// counters that moved, whether it closed the connection) and what each write means to Envoy
// (the filter READMEs). Nothing here knows a filter's internals, so a filter's new rules and
// counters show up without a change: the rule is the counter that moved; the protocol follows
// from which keys were written. FILTERS below only adds words and marks detail counters.

/** Envoy filter-state keys and wasm properties (`wasm.<name>`) the filters write. */
const KEY = {
  cluster: "envoy.tcp_proxy.cluster",
  originalDst: "envoy.network.transport_socket.original_dst_address",
  sans: "envoy.network.upstream_subject_alt_names",
  disableTunneling: "envoy.tcp_proxy.disable_tunneling",
  authority: "wasm.authority",
  outerAuthority: "wasm.outer_authority",
  outerAddress: "wasm.outer_address",
  outerSans: "wasm.outer_sans",
  lbAddress: "wasm.lb_address",
  servicePort: "wasm.service_port",
  targetPort: "wasm.target_port",
} as const;

export type Protocol = "plain" | "mTLS" | "HBONE" | "double HBONE" | "closed";

interface FilterWords {
  /** Counters counted on top of an outcome (never "the rule"). */
  readonly details?: readonly string[];
  /** Words for a rule (counter suffix after `<filter>.`); a rule without words still shows by name. */
  readonly rules?: Readonly<Record<string, string>>;
  /** Filter state, existing before the filter ran, that holds the downstream peer the filter checked. */
  readonly downstreamPeerState?: string;
  /**
   * The filter's tunnels name one address, which is both the CONNECT's :authority (the shipped
   * tunneling_config formats it from original_dst_address) and the next hop on this port (the
   * shipped HBONE cluster's upstream_port_override). Present: SANs + that address mean HBONE.
   */
  readonly tunnelsOnPort?: number;
}

/** The small per-filter table. A new counter needs no entry; add one only for words or details. */
const FILTERS: Readonly<Record<string, FilterWords>> = {
  probe: {
    rules: { routed: "the destination matched a route", unmatched: "no route matched: tcp_proxy's own cluster" },
  },
  passthrough_mtls: {
    details: ["local_network_wins", "plaintext_pod"],
    rules: {
      mtls: "a mesh pod with tlsMode istio: mTLS to exactly that pod, verifying its own identity",
      headless: "a member of a headless service: that service's cluster, to exactly that pod, verifying its identity",
      passthrough: "not a mesh pod on this network, or a pod with tlsMode disabled: plain original-destination passthrough",
      no_destination: "no usable destination address: tcp_proxy's own cluster",
      rejected: "Envoy refused the state that pins the pod and its identity: closed",
    },
  },
  tunnel_port: {
    details: ["client.panic_routing"],
    tunnelsOnPort: 15008,
    downstreamPeerState: "io.tunnel_port.peer_principal",
    rules: {
      "client.tunneled": "an endpoint and its target port found: HBONE to its tunnel port, the service port carried in the CONNECT",
      "client.unknown_passthrough": "a destination the mesh does not know: plain TCP (unknownDestination passthrough)",
      "client.unknown_refused": "a destination the mesh does not know: closed (unknownDestination refuse)",
      "client.no_endpoint": "a known service with no endpoint that can take a tunnel: closed",
      "server.accepted": "peer, service port and target port check out: connected to the application",
      "server.refused_no_peer": "no authenticated mTLS peer: closed before the application is connected",
      "server.refused_missing_port": "no carried service port, no authority text or no destination: closed before the application is connected",
      "server.refused_malformed_port": "a carried service port that is not exactly one canonical port (081, +80, a repeated header's 81,80): closed before the application is connected",
      "server.refused_malformed_authority": "an :authority text that is not the canonical spelling of the destination Envoy parsed from it (ip:09376, [::ffff:ip]:port): closed before the application is connected",
      "server.refused_foreign_authority": "the CONNECT authority is not this workload: closed",
      "server.refused_unserved_port": "a target port this workload does not serve: closed",
      "server.refused_port_mismatch": "a (service port, target port) pair this workload does not serve: closed",
      rejected: "Envoy refused a filter-state write: closed",
    },
  },
  waypoint_route: {
    details: ["unknown_refused"],
    rules: {
      hbone_waypoint: "the service's waypoint, an instance on this network: single HBONE",
      double_hbone_waypoint: "the service's waypoint, an instance on another network: double HBONE through its east-west gateway",
      hbone_endpoint: "no waypoint, an endpoint on this network: single HBONE",
      double_hbone_endpoint: "no waypoint, an endpoint on another network: double HBONE through its east-west gateway",
      hbone_pod: "a mesh pod on this network dialled by IP: single HBONE",
      plaintext_pod: "a pod without a sidecar on this network: plain TCP",
      unknown: "a destination outside this network's mesh view: unknownDestination",
      error_unknown_waypoint: "no usable waypoint instance: closed (never the service's endpoints)",
      error_no_valid_destination: "the chosen remote instance has no gateway: closed",
      error_unknown_gateway: "the network gateway cannot be resolved: closed",
      error_no_endpoint: "no usable endpoint: closed",
      plaintext_endpoint: "no waypoint, an endpoint on this network without HBONE: plain TCP to podIP:targetPort (rule 7)",
      hbone_pod_waypoint: "a pod dialled by IP whose workload has its own waypoint: single HBONE to that waypoint, :authority podIP:port (rule 5)",
      error_unlisted_port: "a service port the service does not list, and no waypoint: closed, as ztunnel (rule 6)",
      error_unknown_pod_waypoint: "the pod's own waypoint has no usable instance on this network: closed (rule 5)",
      error_unknown_gateway_port: "the gateway service does not expose the gateway's HBONE port: closed as an unknown gateway (rule 8)",
      error_unknown_waypoint_port: "the waypoint service does not list the waypoint's HBONE port: closed as an unknown waypoint (rule 8)",
      rejected: "Envoy refused a filter-state write: closed",
    },
  },
};

export interface ObservedWrite {
  readonly key: string;
  readonly value: string;
  readonly source: string;
}

export interface Observed {
  readonly filter: string;
  readonly destination: string;
  readonly closed: boolean;
  /** Every write the filter made, in order (set_envoy_filter_state and set_property). */
  readonly writes: readonly ObservedWrite[];
  /** Filter state that existed before the filter ran. */
  readonly existing: Readonly<Record<string, string>>;
  /** Counter name → how much it moved during this connection. */
  readonly moved: Readonly<Record<string, number>>;
}

export interface Hop {
  readonly hop: string;
  readonly identities: string[];
}

export interface Decision {
  readonly summary: string;
  readonly protocol: Protocol;
  readonly nextHop: string | null;
  readonly cluster: string | null;
  readonly outerAuthority: string | null;
  readonly innerAuthority: string | null;
  readonly identitiesChecked: Hop[];
  readonly rule: string | null;
  readonly ruleMeaning: string | null;
  readonly counter: string | null;
  readonly alsoCounted: string[];
  readonly carried?: Record<string, string>;
}

const sansOf = (value: string | undefined): string[] => (value ? value.split(",").filter((s) => s.length > 0) : []);

/** Which protocol the writes ask Envoy for. Order matters: the most specific evidence first. */
function protocolOf(o: Observed, last: Map<string, string>, words: FilterWords): Protocol {
  if (o.closed) return "closed";
  if (last.has(KEY.outerAddress)) return "double HBONE"; // outer CONNECT through a gateway, inner CONNECT inside it
  if (last.get(KEY.disableTunneling) === "true") return "plain";
  if (last.has(KEY.authority)) return "HBONE"; // tcp_proxy's tunneling_config opens CONNECT with this authority
  if (words.tunnelsOnPort !== undefined && last.has(KEY.originalDst) && last.has(KEY.sans)) return "HBONE"; // that address is the authority
  if (last.has(KEY.sans)) return "mTLS"; // a TLS upstream verifying these SANs
  return "plain";
}

export function describeDecision(o: Observed): Decision {
  const words = FILTERS[o.filter] ?? {};
  const prefix = `${o.filter}.`;
  const last = new Map<string, string>();
  for (const write of o.writes) last.set(write.key, write.value);
  const protocol = protocolOf(o, last, words);

  // The rule: the counter of this filter that moved, detail counters aside.
  const movedNames = Object.keys(o.moved).filter((name) => name.startsWith(prefix) && o.moved[name]! > 0);
  const suffix = (name: string) => name.slice(prefix.length);
  const outcomes = movedNames.filter((name) => !(words.details ?? []).includes(suffix(name)));
  const counter = outcomes[0] ?? null;
  const rule = counter === null ? null : suffix(counter);
  const alsoCounted = movedNames.filter((name) => name !== counter);

  const cluster = protocol === "closed" ? null : (last.get(KEY.cluster) ?? null);
  let nextHop: string | null = null;
  let outerAuthority: string | null = null;
  let innerAuthority: string | null = null;
  const identitiesChecked: Hop[] = [];
  const peer = words.downstreamPeerState ? o.existing[words.downstreamPeerState] : undefined;
  if (peer !== undefined && protocol !== "closed") identitiesChecked.push({ hop: "downstream peer (checked by the filter)", identities: [peer] });
  switch (protocol) {
    case "double HBONE":
      nextHop = last.get(KEY.outerAddress)!;
      outerAuthority = last.get(KEY.outerAuthority) ?? null;
      innerAuthority = last.get(KEY.authority) ?? null;
      identitiesChecked.push({ hop: `outer TLS (gateway ${nextHop})`, identities: sansOf(last.get(KEY.outerSans)) });
      identitiesChecked.push({ hop: "inner TLS (inside the outer CONNECT)", identities: sansOf(last.get(KEY.sans)) });
      break;
    case "HBONE":
      nextHop = last.get(KEY.originalDst) ?? o.destination;
      outerAuthority = last.get(KEY.authority) ?? null;
      if (outerAuthority === null && words.tunnelsOnPort !== undefined) {
        outerAuthority = nextHop;
        nextHop = `${nextHop.slice(0, nextHop.lastIndexOf(":"))}:${words.tunnelsOnPort}`;
      }
      identitiesChecked.push({ hop: `TLS to ${nextHop}`, identities: sansOf(last.get(KEY.sans)) });
      break;
    case "mTLS":
      nextHop = last.get(KEY.originalDst) ?? last.get(KEY.lbAddress) ?? o.destination;
      identitiesChecked.push({ hop: `TLS to ${nextHop}`, identities: sansOf(last.get(KEY.sans)) });
      break;
    case "plain":
      nextHop = last.get(KEY.originalDst) ?? last.get(KEY.lbAddress) ?? o.destination;
      break;
    case "closed":
      break;
  }
  const carried: Record<string, string> = {};
  if (protocol === "HBONE" && last.has(KEY.servicePort)) carried["x-tunnel-service-port (CONNECT header)"] = last.get(KEY.servicePort)!;
  if (protocol === "plain" && last.has(KEY.servicePort) && last.has(KEY.targetPort)) {
    carried["service port (filter state wasm.service_port)"] = last.get(KEY.servicePort)!;
    carried["target port (filter state wasm.target_port)"] = last.get(KEY.targetPort)!;
  }
  const ruleMeaning = rule === null ? null : (words.rules?.[rule] ?? null);
  const decision: Decision = {
    summary: summaryOf(protocol, nextHop, cluster, outerAuthority, innerAuthority, identitiesChecked, counter),
    protocol,
    nextHop,
    cluster,
    outerAuthority,
    innerAuthority,
    identitiesChecked,
    rule,
    ruleMeaning,
    counter,
    alsoCounted,
    ...(Object.keys(carried).length > 0 && { carried }),
  };
  return decision;
}

function summaryOf(
  protocol: Protocol,
  nextHop: string | null,
  cluster: string | null,
  outer: string | null,
  inner: string | null,
  hops: Hop[],
  counter: string | null,
): string {
  const via = cluster ? ` through cluster ${cluster}` : " through tcp_proxy's own cluster";
  const verify = hops
    .filter((h) => !h.hop.startsWith("downstream"))
    .map((h) => `${h.hop} verifying ${h.identities.length ? h.identities.join(" or ") : "(no identity)"}`)
    .join("; ");
  const counted = counter ? ` Counted as ${counter}.` : "";
  switch (protocol) {
    case "closed":
      return `Envoy closes the connection; nothing is sent upstream.${counted}`;
    case "plain":
      return `Plain TCP to ${nextHop}${via}, no TLS.${counted}`;
    case "mTLS":
      return `mTLS to ${nextHop}${via}, ${verify}.${counted}`;
    case "HBONE":
      return `HBONE: HTTP/2 CONNECT over mTLS to ${nextHop}${via}, :authority ${outer}, ${verify}.${counted}`;
    case "double HBONE":
      return `Double HBONE: an outer CONNECT to the gateway ${nextHop} with :authority ${outer}, inside it an inner CONNECT with :authority ${inner}${via}; ${verify}.${counted}`;
  }
}
