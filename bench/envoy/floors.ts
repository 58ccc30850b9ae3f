// Which hand-written fixture is the floor of each filter path of the instruction-count benchmark
// (callgrind_topologies.ts, profile_fixtures.ts): the least any wasm filter doing that path's job
// costs in Envoy, measured beside the filter against the same baseline. The report (bench/report/
// instructions.ts) puts it next to every target it cannot reach.
export const FLOOR_FIXTURE: Readonly<Record<string, string>> = {
  // The plain path's job: read the destination, decide, count once; no value written.
  "passthrough_mtls/plain": "fixture_newconn_min",
  "tunnel_port/hbone": "fixture_job_tunnel_port",
  "waypoint_route/hbone": "fixture_job_waypoint_hbone",
  "waypoint_route/double_hbone": "fixture_job_waypoint_double",
};
