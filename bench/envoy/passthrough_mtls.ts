// passthrough_mtls, real Envoy, A/B. Three sidecars run side by side, built from the shipped
// envoy-configs/passthrough_mtls.yaml so the "with" arm is exactly what operators get:
// - without: the same config minus the wasm filter (every connection: PassthroughCluster, clear);
// - with:    the shipped config (filter on the catch-all chain);
// - native:  what Envoy does without wasm to get mTLS to one pod reached by IP, the shape Istio
//            generates per headless pod: a filter chain matching that pod's IP (and port) → an
//            ORIGINAL_DST cluster with Istio's mTLS that verifies that pod's SAN.
// Two paths: "plain" dials a tlsMode-disabled pod (the filter looks it up and passes it through:
// its pure decision cost, same upstream work as without), "mtls" dials a tlsMode-istio pod (the
// filter's whole job, compared with native). Pods live in one fast upstream Envoy (upstream.ts).
// A fourth sidecar holds the suite's no-op filter in the same place (figures under filter
// "noop"): with − without splits into what any wasm filter costs and what this one adds.
// A fifth sidecar is an A/A control (figures under filter "control", `control: true`): exactly
// the "without" config, a second time. Its per-round ratios against "without" are the noise
// floor of this machine (envoy_noise_floor): the smallest difference these ratios can resolve.
import { emit } from "../emit.js";
import { BenchEnvoys } from "./bench_envoys.js";
import { wasmNetworkFilter } from "../../tests/support/envoy_config.js";
import { atLeast, emitNoiseFloor, emitRatios, median, runAb, type AbTimings, type Arm } from "./ab.js";
import { iperf3, wrk } from "./generators.js";
import { withCpu } from "./proc.js";
import { MTLS_POD, NATIVE_POD_CLUSTER, nativeMtls, PLAIN_POD, shipped, withWasmFilter } from "./passthrough_configs.js";
import { startUpstream } from "./upstream.js";

const FILTER = "passthrough_mtls";
export const SIDECARS = {
  without: { admin: 15010, outbound: 15011 },
  control: { admin: 15110, outbound: 15111 },
  with: { admin: 15020, outbound: 15021 },
  native: { admin: 15030, outbound: 15031 },
  noop: { admin: 15100, outbound: 15101 },
} as const;
export const POD_ENVOY_ADMIN = 15040;
/** The suite's no-op filter where passthrough_mtls sits: the runtime's own cost. */
export const NOOP_FILTER = wasmNetworkFilter({ name: "noop", wasm: "build/noop.wasm", configuration: "" });

export async function passthroughMtlsAb(timings: AbTimings, log: (message: string) => void): Promise<void> {
  const upstream = await startUpstream(POD_ENVOY_ADMIN, PLAIN_POD, MTLS_POD);
  const envoys = new BenchEnvoys();
  try {
    const without = await envoys.start("pt-without", withWasmFilter(SIDECARS.without.admin, SIDECARS.without.outbound, null), SIDECARS.without.admin);
    const withFilter = await envoys.start("pt-with", shipped(SIDECARS.with.admin, SIDECARS.with.outbound), SIDECARS.with.admin);
    const nativeEnvoy = await envoys.start("pt-native", nativeMtls(SIDECARS.native.admin, SIDECARS.native.outbound), SIDECARS.native.admin);
    const noop = await envoys.start("pt-noop", withWasmFilter(SIDECARS.noop.admin, SIDECARS.noop.outbound, NOOP_FILTER), SIDECARS.noop.admin);
    const control = await envoys.start("pt-control", withWasmFilter(SIDECARS.control.admin, SIDECARS.control.outbound, null), SIDECARS.control.admin);

    const plainUrl = `http://${PLAIN_POD.host}:${PLAIN_POD.httpPort}/`;
    const mtlsUrl = `http://${MTLS_POD.host}:${MTLS_POD.httpPort}/`;
    const plainBulk = { host: PLAIN_POD.host, port: PLAIN_POD.bulkPort };
    const mtlsBulk = { host: MTLS_POD.host, port: MTLS_POD.bulkPort };
    // The control sits on the other side of "without" from "with"/plain: in ABBA order both are
    // next to their baseline in every round, and every other arm keeps its distance to it.
    const arms: Arm[] = [
      {
        // A/A control: the same config as "without", a second sidecar.
        filter: "control", control: true, variant: "without", path: "plain", sidecar: control, capturePort: SIDECARS.control.outbound, url: plainUrl, bulk: plainBulk,
        verify: (delta, n) => atLeast(delta, "cluster.PassthroughCluster.upstream_cx_total", n),
      },
      {
        variant: "without", path: "plain", sidecar: without, capturePort: SIDECARS.without.outbound, url: plainUrl, bulk: plainBulk,
        verify: (delta, n) => atLeast(delta, "cluster.PassthroughCluster.upstream_cx_total", n),
      },
      {
        variant: "with", path: "plain", sidecar: withFilter, capturePort: SIDECARS.with.outbound, url: plainUrl, bulk: plainBulk,
        verify: (delta, n) => atLeast(delta, `wasmcustom.${FILTER}.plaintext_pod`, n) ?? atLeast(delta, "cluster.PassthroughCluster.upstream_cx_total", n),
      },
      {
        variant: "with", path: "mtls", sidecar: withFilter, capturePort: SIDECARS.with.outbound, url: mtlsUrl, bulk: mtlsBulk,
        verify: (delta, n) => atLeast(delta, `wasmcustom.${FILTER}.mtls`, n) ?? atLeast(delta, "cluster.outbound_mtls_passthrough.upstream_cx_total", n),
      },
      {
        variant: "native", path: "mtls", sidecar: nativeEnvoy, capturePort: SIDECARS.native.outbound, url: mtlsUrl, bulk: mtlsBulk,
        // The pod's own chain took the connections and none went out in clear. (Its cluster's
        // upstream_cx_total is not the check: under full load it counted 97-98.6% of the
        // requests wrk completed, run after run, while with/mtls counted all of them.)
        verify: (delta, n) =>
          atLeast(delta, "tcp.pod_chain.downstream_cx_total", n) ??
          (delta("cluster.PassthroughCluster.upstream_cx_total") > n / 100 ? "connections went to PassthroughCluster (in clear)" : undefined),
      },
      {
        // The suite's no-op filter where passthrough_mtls sits: what any wasm filter costs here.
        filter: "noop", variant: "with", path: "plain", sidecar: noop, capturePort: SIDECARS.noop.outbound, url: plainUrl, bulk: plainBulk,
        verify: (delta, n) => atLeast(delta, "cluster.PassthroughCluster.upstream_cx_total", n),
      },
    ];
    const result = await runAb(FILTER, arms, timings, log);
    emitRatios(FILTER, arms, result, 2, 1); // the filter's decision cost: with vs without, same path
    emitRatios(FILTER, arms, result, 3, 4); // the filter's mTLS job vs Envoy's native per-pod config
    emitRatios(FILTER, arms, result, 5, 1); // the runtime alone (noop filter) vs no filter
    emitRatios(FILTER, arms, result, 0, 1); // A/A control: the same config twice
    emitNoiseFloor(FILTER, arms, result, 0, 1);

    // Is the generator the bottleneck? The same wrk straight at the pod, and its CPU through Envoy.
    const direct = await withCpu(upstream.envoy.child.pid!, () => wrk(plainUrl, timings.concurrency, timings.rateSeconds, false));
    const through = result.samples[2]!.flatMap((sample) => (sample ? [sample] : []));
    emit({
      figure: "envoy_generator_headroom",
      filter: FILTER,
      tool: "wrk",
      metric: "conn_rate_per_s",
      direct_value: Math.round(direct.result.perSecond),
      through_envoy_value: Math.round(median(through.map((s) => s.conn_rate_per_s))),
      generator_cpu_pct: Math.round(median(through.map((s) => s.generatorCpuPct))),
      envoy_cpu_pct: Math.round(median(through.map((s) => s.envoyCpuPct))),
      direct_generator_cpu_pct: Math.round((100 * direct.result.cpuUs) / direct.result.wallUs),
      direct_upstream_cpu_pct: Math.round((100 * direct.cpuUs) / direct.wallUs),
    });
    const directBulk = await iperf3(plainBulk.host, plainBulk.port, timings.bulkSeconds, false);
    emit({
      figure: "envoy_generator_headroom",
      filter: FILTER,
      tool: "iperf3",
      metric: "bulk_mb_per_s",
      direct_value: Math.round(directBulk.mbPerSecond),
      through_envoy_value: Math.round(median(through.map((s) => s.bulk_mb_per_s))),
      generator_cpu_pct: Math.round((100 * directBulk.cpuUs) / directBulk.wallUs),
    });
  } finally {
    await envoys.stopAll();
    await upstream.stop();
  }
}
