// Templated pieces of Envoy bootstrap configs for the end-to-end tests. Each returns plain objects
// that the harness writes as YAML, so a test states only what differs.

export interface WasmFilterOptions {
  /** The filter's name token: plugin name, root_id and vm_id. */
  name: string;
  /** Path of the .wasm (relative to the repository root, Envoy's working directory). */
  wasm: string;
  /** Plugin configuration, passed as a google.protobuf.StringValue. */
  configuration: string;
  failurePolicy?: "FAIL_CLOSED" | "FAIL_OPEN" | "FAIL_RELOAD";
}

export function wasmNetworkFilter(options: WasmFilterOptions): object {
  return {
    name: "envoy.filters.network.wasm",
    typed_config: {
      "@type": "type.googleapis.com/envoy.extensions.filters.network.wasm.v3.Wasm",
      config: {
        name: options.name,
        root_id: options.name,
        configuration: {
          "@type": "type.googleapis.com/google.protobuf.StringValue",
          value: options.configuration,
        },
        vm_config: {
          vm_id: options.name,
          runtime: "envoy.wasm.runtime.v8",
          code: { local: { filename: options.wasm } },
        },
        failure_policy: options.failurePolicy ?? "FAIL_CLOSED",
      },
    },
  };
}

export function tcpProxy(statPrefix: string, cluster: string): object {
  return {
    name: "envoy.filters.network.tcp_proxy",
    typed_config: {
      "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
      stat_prefix: statPrefix,
      cluster,
    },
  };
}

export function socketAddress(address: string, port: number): object {
  return { socket_address: { address, port_value: port } };
}

export interface ListenerOptions {
  name: string;
  address: string;
  port: number;
  /** More loopback addresses on the same port, served by the same filter chain. */
  additionalAddresses?: string[];
  filters: object[];
  listenerFilters?: object[];
}

export function listener(options: ListenerOptions): object {
  const result: Record<string, unknown> = {
    name: options.name,
    address: socketAddress(options.address, options.port),
    filter_chains: [{ filters: options.filters }],
  };
  if (options.additionalAddresses?.length) {
    result.additional_addresses = options.additionalAddresses.map((address) => ({
      address: socketAddress(address, options.port),
    }));
  }
  if (options.listenerFilters) result.listener_filters = options.listenerFilters;
  return result;
}

export function staticCluster(name: string, address: string, port: number): object {
  return {
    name,
    type: "STATIC",
    connect_timeout: "2s",
    load_assignment: {
      cluster_name: name,
      endpoints: [{ lb_endpoints: [{ endpoint: { address: socketAddress(address, port) } }] }],
    },
  };
}

export interface BootstrapOptions {
  adminPort: number;
  listeners: object[];
  clusters: object[];
}

export function bootstrap(options: BootstrapOptions): object {
  return {
    admin: { address: socketAddress("127.0.0.1", options.adminPort) },
    static_resources: { listeners: options.listeners, clusters: options.clusters },
  };
}
