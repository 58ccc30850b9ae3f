// Istio's `meshNetworks` setting (MeshNetworks in istio.io/api mesh/v1alpha1/network.proto), read
// from a file in the same YAML/JSON shape istiod reads (`--meshNetworks` / the istio ConfigMap's
// `meshNetworks` key):
//
//   networks:
//     net1:
//       endpoints: [{fromRegistry: cluster1}, {fromCidr: 10.1.0.0/16}]
//       gateways: [{address: 1.2.3.4, port: 15443}, {registryServiceName: eastwest.istio-system.svc.cluster.local, port: 15443}]
//
// What the feed takes from it is what istiod's sidecar registry takes (networkManager in
// pilot/pkg/serviceregistry/kube/controller/network.go): which network a cluster's endpoints are
// on (`fromRegistry`) and which network an endpoint IP is on (`fromCidr`). Its gateways are
// SNI-DNAT (15443) gateways with no HBONE port; istiod's ambient index skips such gateways for
// HBONE (getNetworkGatewayAddress ignores HBONEPort == 0), and the model's `networkGateway` is an
// HBONE gateway, so they are read, counted and not used (README "What the model cannot express").
import { BlockList, isIP } from "node:net";
import { parse } from "yaml";

export interface MeshNetworkGateway {
  address?: string;
  registryServiceName?: string;
  port?: number;
}

export interface MeshNetworks {
  networks: Record<string, { endpoints?: Array<{ fromRegistry?: string; fromCidr?: string }>; gateways?: MeshNetworkGateway[] }>;
}

interface CidrEntry {
  network: string;
  prefix: number;
  list: BlockList;
}

export class NetworkResolver {
  private readonly byRegistry = new Map<string, string>();
  private readonly cidrs: CidrEntry[] = [];
  readonly gatewaysIgnored: number;

  constructor(readonly config: MeshNetworks = { networks: {} }) {
    let ignored = 0;
    // Sorted by name: istiod walks a Go map (random order) and keeps the first fromRegistry
    // match with a warning; a stable order makes the feed's choice reproducible.
    for (const name of Object.keys(config.networks ?? {}).sort()) {
      const net = config.networks[name] ?? {};
      for (const ep of net.endpoints ?? []) {
        if (ep.fromRegistry && !this.byRegistry.has(ep.fromRegistry)) this.byRegistry.set(ep.fromRegistry, name);
        if (ep.fromCidr) {
          const [base, bits] = ep.fromCidr.split("/");
          const family = isIP(base ?? "");
          const prefix = Number(bits);
          if (family === 0 || !Number.isInteger(prefix) || prefix < 0 || prefix > (family === 4 ? 32 : 128)) {
            throw new Error(`meshNetworks.networks.${name}.endpoints: fromCidr is not a CIDR: ${JSON.stringify(ep.fromCidr)}`);
          }
          const list = new BlockList();
          list.addSubnet(base, prefix, family === 4 ? "ipv4" : "ipv6");
          this.cidrs.push({ network: name, prefix, list });
        }
      }
      ignored += (net.gateways ?? []).length;
    }
    // istiod's CIDR ranger returns the containing networks from the least specific down and
    // takes the first; the same order here.
    this.cidrs.sort((a, b) => a.prefix - b.prefix || a.network.localeCompare(b.network));
    this.gatewaysIgnored = ignored;
  }

  static parse(text: string): NetworkResolver {
    const doc = (parse(text) ?? {}) as MeshNetworks;
    if (typeof doc !== "object" || (doc.networks !== undefined && typeof doc.networks !== "object")) {
      throw new Error("meshNetworks: expected an object with a `networks` map");
    }
    return new NetworkResolver({ networks: doc.networks ?? {} });
  }

  /** The network `fromRegistry` assigns to a cluster's endpoints, or "". */
  registryNetwork(clusterId: string): string {
    return this.byRegistry.get(clusterId) ?? "";
  }

  /** The network a `fromCidr` range assigns to an endpoint IP, or "". */
  cidrNetwork(ip: string): string {
    const family = isIP(ip);
    if (family === 0) return "";
    for (const entry of this.cidrs) if (entry.list.check(ip, family === 4 ? "ipv4" : "ipv6")) return entry.network;
    return "";
  }
}
