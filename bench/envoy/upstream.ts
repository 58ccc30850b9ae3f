// The fast upstream every topology ends at, so the pod is never the bottleneck: one Envoy (its
// own process, one worker) answering HTTP with a `direct_response` (a few bytes, no backend), in
// clear and over mTLS with a pod's SPIFFE certificate, and iperf3 servers for bulk transfers
// (over mTLS the pod Envoy terminates TLS and forwards to a local iperf3).
import { spawn, type ChildProcess } from "node:child_process";
import { EnvoyProcess, sleep } from "../../tests/support/envoy.js";
import { socketAddress, staticCluster, tcpProxy } from "../../tests/support/envoy_config.js";

export const RESPONSE_BODY = "ok\n";

export interface PodAddress {
  host: string;
  httpPort: number;
  bulkPort: number;
}

export interface TlsPodAddress extends PodAddress {
  /** Files build/certs/<certName>.crt/.key: the identity this pod presents. */
  certName: string;
}

export function directResponse(statPrefix: string): object {
  return {
    name: "envoy.filters.network.http_connection_manager",
    typed_config: {
      "@type": "type.googleapis.com/envoy.extensions.filters.network.http_connection_manager.v3.HttpConnectionManager",
      stat_prefix: statPrefix,
      codec_type: "HTTP1",
      route_config: {
        virtual_hosts: [{ name: "pod", domains: ["*"], routes: [{ match: { prefix: "/" }, direct_response: { status: 200, body: { inline_string: RESPONSE_BODY } } }] }],
      },
      http_filters: [{ name: "envoy.filters.http.router", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.http.router.v3.Router" } }],
    },
  };
}

/** An Istio-like inbound TLS context: the pod's certificate, client certificates from the mesh CA required. */
function podTls(certName: string): object {
  return {
    name: "envoy.transport_sockets.tls",
    typed_config: {
      "@type": "type.googleapis.com/envoy.extensions.transport_sockets.tls.v3.DownstreamTlsContext",
      require_client_certificate: true,
      common_tls_context: {
        tls_certificates: [{ certificate_chain: { filename: `build/certs/${certName}.crt` }, private_key: { filename: `build/certs/${certName}.key` } }],
        validation_context: { trusted_ca: { filename: "build/certs/ca.crt" } },
      },
    },
  };
}

/** The loopback iperf3 server behind the mTLS pod's bulk port. */
const TLS_BULK_BACKEND = { host: "127.0.0.1", port: 5202 };

export function podEnvoyConfig(adminPort: number, plain: PodAddress, tls: TlsPodAddress): object {
  const listen = (name: string, host: string, port: number, filters: object[], transport?: object) => ({
    name,
    address: socketAddress(host, port),
    filter_chains: [{ filters, ...(transport ? { transport_socket: transport } : {}) }],
  });
  return {
    admin: { address: socketAddress("127.0.0.1", adminPort) },
    static_resources: {
      listeners: [
        listen("plain_http", plain.host, plain.httpPort, [directResponse("plain_http")]),
        listen("mtls_http", tls.host, tls.httpPort, [directResponse("mtls_http")], podTls(tls.certName)),
        listen("mtls_bulk", tls.host, tls.bulkPort, [tcpProxy("mtls_bulk", "iperf")], podTls(tls.certName)),
      ],
      clusters: [staticCluster("iperf", TLS_BULK_BACKEND.host, TLS_BULK_BACKEND.port)],
    },
  };
}

export interface Upstream {
  envoy: EnvoyProcess;
  stop(): Promise<void>;
}

export function startIperfServer(host: string, port: number): ChildProcess {
  return spawn("iperf3", ["-s", "-B", host, "-p", String(port)], { stdio: "ignore" });
}

export async function startUpstream(adminPort: number, plain: PodAddress, tls: TlsPodAddress): Promise<Upstream> {
  const servers = [startIperfServer(plain.host, plain.bulkPort), startIperfServer(TLS_BULK_BACKEND.host, TLS_BULK_BACKEND.port)];
  const stopServers = async () => {
    for (const server of servers) if (server.exitCode === null) server.kill("SIGTERM");
  };
  try {
    const envoy = await EnvoyProcess.start({ name: "bench-pod", adminPort, config: podEnvoyConfig(adminPort, plain, tls), logLevel: "warn" });
    await sleep(200); // iperf3 servers listening
    for (const server of servers) if (server.exitCode !== null) throw new Error(`iperf3 server exited (${server.exitCode})`);
    return {
      envoy,
      stop: async () => {
        await envoy.stop();
        await stopServers();
      },
    };
  } catch (error) {
    await stopServers();
    throw error;
  }
}

/**
 * An application behind a sidecar, on one port: HTTP/1 answered by a direct_response, anything
 * else (iperf3) relayed to a loopback iperf3 server at `bulk`. http_inspector tells them apart;
 * iperf3's 37-byte cookie never lets it decide, so after 100 ms such a connection goes to the
 * default (bulk) chain. iperf3 times its transfer only after that.
 */
export function appEnvoyConfig(adminPort: number, host: string, port: number, bulk: { host: string; port: number }): object {
  return {
    admin: { address: socketAddress("127.0.0.1", adminPort) },
    static_resources: {
      listeners: [
        {
          name: "app",
          address: socketAddress(host, port),
          listener_filters_timeout: "0.1s",
          continue_on_listener_filters_timeout: true,
          listener_filters: [{ name: "envoy.filters.listener.http_inspector", typed_config: { "@type": "type.googleapis.com/envoy.extensions.filters.listener.http_inspector.v3.HttpInspector" } }],
          filter_chains: [
            { filter_chain_match: { application_protocols: ["http/1.1", "http/1.0"] }, filters: [directResponse("app_http")] },
            { filters: [tcpProxy("app_bulk", "iperf")] },
          ],
        },
      ],
      clusters: [staticCluster("iperf", bulk.host, bulk.port)],
    },
  };
}
