// Waiting for a feed process started by a benchmark: /readyz on its operator port.
import type { ChildProcess } from "node:child_process";

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Resolves once `base`/readyz answers 200; throws if the process exits or the time runs out. */
export async function waitReady(base: string, child: ChildProcess, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (child.exitCode !== null) throw new Error(`feed exited (${child.exitCode})`);
    try {
      if ((await fetch(`${base}/readyz`)).status === 200) return;
    } catch {
      /* not listening yet */
    }
    await sleep(200);
  }
  throw new Error(`feed not ready within ${timeoutMs} ms`);
}
