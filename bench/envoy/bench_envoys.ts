// The Envoys one benchmark topology starts (sidecars, waypoints, gateways, app stand-ins): each
// named bench-<name>, logging at warn, and all stopped together, the last started first.
import { EnvoyProcess } from "../../tests/support/envoy.js";

export class BenchEnvoys {
  private started: EnvoyProcess[] = [];

  async start(name: string, config: object | string, adminPort: number, adminAddress?: string): Promise<EnvoyProcess> {
    const envoy = await EnvoyProcess.start({ name: `bench-${name}`, adminPort, adminAddress, config, logLevel: "warn" });
    this.started.push(envoy);
    return envoy;
  }

  async stopAll(): Promise<void> {
    const envoys = this.started.reverse();
    this.started = [];
    for (const envoy of envoys) await envoy.stop();
  }
}
