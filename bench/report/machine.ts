// The machine a run measured: the `run` figure bench/index.ts emits first, so a report rendered
// later (or elsewhere) still describes the machine the figures came from.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import os from "node:os";

const ENVOY = ".venv/envoy";

/** The Envoy binary's own version (`envoy --version`), else the pinned one from package.json. */
function envoyVersion(): string {
  const result = spawnSync(ENVOY, ["--version"], { encoding: "utf8", timeout: 10_000 });
  const found = /\/(\d+\.\d+\.\d+)\//.exec(result.stdout ?? "");
  if (found) return found[1]!;
  try {
    const pinned = JSON.parse(readFileSync("package.json", "utf8")).config?.envoyVersion;
    return pinned ? `${pinned} (pinned; ${ENVOY} not runnable)` : "unknown";
  } catch {
    return "unknown";
  }
}

export function runFigure(quick: boolean): Record<string, unknown> {
  const cpus = os.cpus();
  return {
    figure: "run",
    date: new Date().toISOString(),
    quick,
    cpu: cpus[0]?.model.trim() ?? "unknown",
    cores: cpus.length,
    memory_gb: Math.round(os.totalmem() / 2 ** 30),
    os: `${os.type()} ${os.release()}`,
    node: process.version,
    envoy: envoyVersion(),
    load_average: os.loadavg().map((x) => Math.round(x * 10) / 10),
  };
}
