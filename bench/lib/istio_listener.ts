// The listener Istio's sidecar config (LDS) carries today for each (pod IP, port) of a headless
// service, modelled so its size can be measured: proto3 JSON (what `istioctl proxy-config
// listener -o json` prints, here compact) and the protobuf wire bytes Envoy receives.
//
// Model (Istio 1.2x, sidecar, outbound, a headless Service port declared TCP, e.g. `tcp-db`):
//   Listener {
//     name: "<podIP>_<port>"
//     address.socket_address { address: <podIP>, port_value: <port> }
//     filter_chains: [ {
//       filters: [
//         istio.stats      (typed_config Any stats.PluginConfig, empty: default metrics),
//         envoy.filters.network.tcp_proxy (typed_config Any TcpProxy {
//           stat_prefix = cluster = "outbound|<port>||<hostname>",
//           access_log: [ envoy.access_loggers.file → FileAccessLog { path /dev/stdout,
//                         log_format.text_format_source.inline_string = Istio's default
//                         TEXT format } ] }) ] } ]
//     traffic_direction: OUTBOUND
//     bind_to_port: false        (reached through virtualOutbound's use_original_dst)
//   }
// Left out, so the figure is a LOWER bound of what Istio sends per pod:
// - listener_filters (tls_inspector / http_inspector), listener_filters_timeout and
//   continue_on_listener_filters_timeout, and the second (HTTP) filter chain with its
//   http_connection_manager: Istio adds them when the port's protocol is sniffed (unnamed or
//   unrecognised port names), which is the common case and the bulk of the ~40 KB/pod
//   reported on a real cluster;
// - metadata (Istio sets none on these listeners as far as public dumps show), the LDS
//   envelope (each resource is an Any with a 52-byte type URL, plus its name) and the matching
//   cluster-side state;
// - access logging is on (mesh `accessLogFile: /dev/stdout`, common in production); without it
//   the listener is ~300 protobuf bytes instead of ~970 (~520 JSON bytes instead of ~1290).
// Field numbers are Envoy's (envoy/config/listener/v3/listener.proto, listener_components.proto,
// core/v3/address.proto, base.proto, substitution_format_string.proto, accesslog/v3,
// access_loggers/file/v3, filters/network/tcp_proxy/v3). Field names are declared in proto3
// JSON (lowerCamelCase) form; names do not affect the wire bytes.
import protobuf from "protobufjs";

/** Istio's default access log format (EnvoyTextLogFormat, meshConfig.accessLogFormat unset). */
const ISTIO_TEXT_LOG_FORMAT =
  '[%START_TIME%] "%REQ(:METHOD)% %REQ(X-ENVOY-ORIGINAL-PATH?:PATH)% %PROTOCOL%" %RESPONSE_CODE% ' +
  '%RESPONSE_FLAGS% %RESPONSE_CODE_DETAILS% %CONNECTION_TERMINATION_DETAILS% ' +
  '"%UPSTREAM_TRANSPORT_FAILURE_REASON%" %BYTES_RECEIVED% %BYTES_SENT% %DURATION% ' +
  '%RESP(X-ENVOY-UPSTREAM-SERVICE-TIME)% "%REQ(X-FORWARDED-FOR)%" "%REQ(USER-AGENT)%" ' +
  '"%REQ(X-REQUEST-ID)%" "%REQ(:AUTHORITY)%" "%UPSTREAM_HOST%" %UPSTREAM_CLUSTER_RAW% ' +
  "%UPSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_LOCAL_ADDRESS% %DOWNSTREAM_REMOTE_ADDRESS% " +
  "%REQUESTED_SERVER_NAME% %ROUTE_NAME%\n";

const root = protobuf.Root.fromJSON({
  nested: {
    google: {
      nested: {
        protobuf: {
          nested: {
            // protobufjs expands {"@type": ...} objects for a type named .google.protobuf.Any;
            // its wrapper sets `type_url`, so that field keeps its proto name.
            Any: { fields: { type_url: { type: "string", id: 1 }, value: { type: "bytes", id: 2 } } },
            BoolValue: { fields: { value: { type: "bool", id: 1 } } },
          },
        },
      },
    },
    stats: { nested: { PluginConfig: { fields: {} } } },
    envoy: {
      nested: {
        config: {
          nested: {
            core: {
              nested: {
                v3: {
                  nested: {
                    TrafficDirection: { values: { UNSPECIFIED: 0, INBOUND: 1, OUTBOUND: 2 } },
                    SocketAddress: {
                      fields: { address: { type: "string", id: 2 }, portValue: { type: "uint32", id: 3 } },
                    },
                    Address: { fields: { socketAddress: { type: "SocketAddress", id: 1 } } },
                    DataSource: { fields: { inlineString: { type: "string", id: 3 } } },
                    SubstitutionFormatString: { fields: { textFormatSource: { type: "DataSource", id: 5 } } },
                  },
                },
              },
            },
            accesslog: {
              nested: {
                v3: {
                  nested: {
                    AccessLog: {
                      fields: {
                        name: { type: "string", id: 1 },
                        typedConfig: { type: "google.protobuf.Any", id: 4 },
                      },
                    },
                  },
                },
              },
            },
            listener: {
              nested: {
                v3: {
                  nested: {
                    Filter: {
                      fields: {
                        name: { type: "string", id: 1 },
                        typedConfig: { type: "google.protobuf.Any", id: 4 },
                      },
                    },
                    FilterChain: { fields: { filters: { rule: "repeated", type: "Filter", id: 3 } } },
                    Listener: {
                      fields: {
                        name: { type: "string", id: 1 },
                        address: { type: "envoy.config.core.v3.Address", id: 2 },
                        filterChains: { rule: "repeated", type: "FilterChain", id: 3 },
                        trafficDirection: { type: "envoy.config.core.v3.TrafficDirection", id: 16 },
                        bindToPort: { type: "google.protobuf.BoolValue", id: 26 },
                      },
                    },
                  },
                },
              },
            },
          },
        },
        extensions: {
          nested: {
            filters: {
              nested: {
                network: {
                  nested: {
                    tcp_proxy: {
                      nested: {
                        v3: {
                          nested: {
                            TcpProxy: {
                              fields: {
                                statPrefix: { type: "string", id: 1 },
                                cluster: { type: "string", id: 2 },
                                accessLog: {
                                  rule: "repeated",
                                  type: "envoy.config.accesslog.v3.AccessLog",
                                  id: 5,
                                },
                              },
                            },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
            access_loggers: {
              nested: {
                file: {
                  nested: {
                    v3: {
                      nested: {
                        FileAccessLog: {
                          fields: {
                            path: { type: "string", id: 1 },
                            logFormat: { type: "envoy.config.core.v3.SubstitutionFormatString", id: 5 },
                          },
                        },
                      },
                    },
                  },
                },
              },
            },
          },
        },
      },
    },
  },
});

const Listener = root.lookupType("envoy.config.listener.v3.Listener");

/** The per-pod listener in proto3 JSON form. */
export function istioHeadlessListenerJson(ip: string, port: number, hostname: string): Record<string, unknown> {
  const cluster = `outbound|${port}||${hostname}`;
  return {
    name: `${ip}_${port}`,
    address: { socketAddress: { address: ip, portValue: port } },
    filterChains: [
      {
        filters: [
          { name: "istio.stats", typedConfig: { "@type": "type.googleapis.com/stats.PluginConfig" } },
          {
            name: "envoy.filters.network.tcp_proxy",
            typedConfig: {
              "@type": "type.googleapis.com/envoy.extensions.filters.network.tcp_proxy.v3.TcpProxy",
              statPrefix: cluster,
              cluster,
              accessLog: [
                {
                  name: "envoy.access_loggers.file",
                  typedConfig: {
                    "@type": "type.googleapis.com/envoy.extensions.access_loggers.file.v3.FileAccessLog",
                    path: "/dev/stdout",
                    logFormat: { textFormatSource: { inlineString: ISTIO_TEXT_LOG_FORMAT } },
                  },
                },
              ],
            },
          },
        ],
      },
    ],
    trafficDirection: "OUTBOUND",
    bindToPort: false,
  };
}

export interface ListenerSize {
  /** Serialized envoy.config.listener.v3.Listener. */
  readonly protoBytes: number;
  /** Compact proto3 JSON (UTF-8). */
  readonly jsonBytes: number;
}

export function istioHeadlessListenerSize(ip: string, port: number, hostname: string): ListenerSize {
  const json = istioHeadlessListenerJson(ip, port, hostname);
  // proto3 JSON writes BoolValue as a bare bool; protobufjs wants the message.
  const message = Listener.fromObject({ ...json, bindToPort: { value: json.bindToPort } });
  return {
    protoBytes: Listener.encode(message).finish().length,
    jsonBytes: Buffer.byteLength(JSON.stringify(json)),
  };
}
