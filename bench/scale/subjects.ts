// What the scale benchmark runs for each filter: its module, its own configuration fields on top
// of the shared snapshot (lib/mesh_snapshot.ts), the routes its decision can take with the
// counter each one bumps, connections that take each route, and the mix of a "typical" stream.
// The fields and routes follow each filter's README (filters/<name>/README.md) and its shipped
// Envoy config (envoy-configs/).
import type { ConnectOptions } from "../../host/index.js";
import {
  hasWaypoint,
  identity,
  isDisabled,
  isHeadlessMember,
  isLocalWaypoint,
  localIp,
  prng,
  remoteOnlyIp,
  targetPort,
  vip,
  waypointOf,
  type OwnFields,
  type Snapshot,
} from "../lib/mesh_snapshot.js";

export interface Route {
  readonly name: string;
  /** The counter (`<rootId>.<name>`) every connection of this route bumps exactly once. */
  readonly counter: string;
  /** Share of the mixed stream. */
  readonly weight: number;
  /** One connection of this route, drawn with `random`. */
  readonly draw: (snapshot: Snapshot, random: () => number) => ConnectOptions;
}

export interface Subject {
  /** Figure name: the filter, plus its role when one module has two. */
  readonly name: string;
  readonly wasm: string;
  readonly rootId: string;
  readonly own: OwnFields;
  readonly routes: readonly Route[];
}

const pick = (random: () => number, n: number): number => Math.floor(random() * n);

/** A local pod index satisfying `ok`, uniformly over the whole table (cache effects matter at 1M). */
function localPod(snapshot: Snapshot, random: () => number, ok: (i: number) => boolean): number {
  for (;;) {
    const i = pick(random, snapshot.localPods);
    if (ok(i)) return i;
  }
}

/** A ClusterIP service index satisfying `ok`. */
function service(snapshot: Snapshot, random: () => number, ok: (s: number) => boolean): number {
  for (;;) {
    const s = pick(random, snapshot.services);
    if (ok(s)) return s;
  }
}

const outsideMesh = (random: () => number): ConnectOptions => ({
  destination: `192.168.${pick(random, 256)}.${1 + pick(random, 254)}:443`,
});
const istioPod = (i: number): boolean => !isDisabled(i) && !isHeadlessMember(i);
/** The pod's IP at its target port: what a client dials when it addresses the pod directly. */
const podDestination = (i: number): ConnectOptions => ({ destination: `${localIp(i)}:${targetPort(i)}` });

export const PASSTHROUGH_MTLS: Subject = {
  name: "passthrough_mtls",
  wasm: "build/passthrough_mtls.wasm",
  rootId: "passthrough_mtls",
  own: { localNetwork: "" },
  routes: [
    { name: "mtls", counter: "mtls", weight: 0.6, draw: (s, r) => podDestination(localPod(s, r, istioPod)) },
    {
      name: "headless",
      counter: "headless",
      weight: 0.15,
      draw: (s, r) => {
        const m = s.headlessMembers[pick(r, s.headlessMembers.length)]!;
        return { destination: `${m.ip}:${m.port}` };
      },
    },
    { name: "plaintext_pod", counter: "plaintext_pod", weight: 0.1, draw: (s, r) => podDestination(localPod(s, r, isDisabled)) },
    {
      // Half outside the mesh, half pods that exist only on the other network.
      name: "not_a_pod",
      counter: "passthrough",
      weight: 0.15,
      draw: (s, r) =>
        r() < 0.5 ? outsideMesh(r) : { destination: `${remoteOnlyIp(1 + 2 * pick(r, Math.floor(s.remotePods / 2)))}:8080` },
    },
  ],
};

export const TUNNEL_PORT_CLIENT: Subject = {
  name: "tunnel_port_client",
  wasm: "build/tunnel_port.wasm",
  rootId: "tunnel_port",
  own: { role: "client" },
  routes: [
    // A service VIP: an endpoint is picked (round robin) and its own target port carried.
    { name: "vip", counter: "client.tunneled", weight: 0.7, draw: (s, r) => ({ destination: `${vip(service(s, r, () => true))}:80` }) },
    { name: "pod", counter: "client.tunneled", weight: 0.15, draw: (s, r) => podDestination(localPod(s, r, istioPod)) },
    { name: "unknown", counter: "client.unknown_passthrough", weight: 0.15, draw: (_s, r) => outsideMesh(r) },
  ],
};

/** The server role runs in one pod's sidecar: local pod 0 (tlsMode istio, target port 8080). */
const SERVER_POD = 0;
/** A port no service maps to on that pod. */
const UNSERVED_PORT = 9999;
const tunnelArrival = (port: number, random: () => number): ConnectOptions => ({
  source: "127.0.0.6:40000",
  destination: `${localIp(SERVER_POD)}:${port}`,
  filterState: {
    "io.tunnel_port.service_port": "80",
    "io.tunnel_port.authority": `${localIp(SERVER_POD)}:${port}`,
    "io.tunnel_port.peer_principal": identity(1 + pick(random, 999)),
  },
});

export const TUNNEL_PORT_SERVER: Subject = {
  name: "tunnel_port_server",
  wasm: "build/tunnel_port.wasm",
  rootId: "tunnel_port",
  own: { role: "server", localWorkload: localIp(SERVER_POD) },
  routes: [
    { name: "accepted", counter: "server.accepted", weight: 0.9, draw: (_s, r) => tunnelArrival(targetPort(SERVER_POD), r) },
    { name: "unserved_port", counter: "server.refused_unserved_port", weight: 0.1, draw: (_s, r) => tunnelArrival(UNSERVED_PORT, r) },
  ],
};

/** The waypoint_route sidecar's own workload: local pod 1 (tlsMode istio). */
const SOURCE_POD = 1;

export const WAYPOINT_ROUTE: Subject = {
  name: "waypoint_route",
  wasm: "build/waypoint_route.wasm",
  rootId: "waypoint_route",
  own: { localWorkload: localIp(SOURCE_POD) },
  routes: [
    {
      name: "hbone_waypoint",
      counter: "hbone_waypoint",
      weight: 0.1,
      draw: (s, r) => ({ destination: `${vip(service(s, r, (x) => hasWaypoint(x) && isLocalWaypoint(waypointOf(x, s.waypoints))))}:80` }),
    },
    {
      name: "double_hbone_waypoint",
      counter: "double_hbone_waypoint",
      weight: 0.05,
      draw: (s, r) => ({ destination: `${vip(service(s, r, (x) => hasWaypoint(x) && !isLocalWaypoint(waypointOf(x, s.waypoints))))}:80` }),
    },
    { name: "hbone_endpoint", counter: "hbone_endpoint", weight: 0.6, draw: (s, r) => ({ destination: `${vip(service(s, r, (x) => !hasWaypoint(x)))}:80` }) },
    { name: "hbone_pod", counter: "hbone_pod", weight: 0.1, draw: (s, r) => podDestination(localPod(s, r, istioPod)) },
    { name: "unknown", counter: "unknown", weight: 0.15, draw: (_s, r) => outsideMesh(r) },
  ],
};

export const SUBJECTS: readonly Subject[] = [PASSTHROUGH_MTLS, TUNNEL_PORT_CLIENT, TUNNEL_PORT_SERVER, WAYPOINT_ROUTE];

/** `count` connections of one route, or of the weighted mix when `route` is undefined. */
export function drawConnections(subject: Subject, snapshot: Snapshot, count: number, route?: Route, seed = 2): ConnectOptions[] {
  const random = prng(seed);
  const out: ConnectOptions[] = [];
  for (let n = 0; n < count; n++) {
    let chosen = route;
    if (chosen === undefined) {
      let x = random();
      chosen = subject.routes[subject.routes.length - 1]!;
      for (const candidate of subject.routes) {
        if (x < candidate.weight) {
          chosen = candidate;
          break;
        }
        x -= candidate.weight;
      }
    }
    out.push(chosen.draw(snapshot, random));
  }
  return out;
}
