import { createServer } from "node:net";

/** A TCP port that was free a moment ago on `host` (the kernel picks it). */
export function freePort(host = "127.0.0.1"): Promise<number> {
  return new Promise((done, fail) => {
    const server = createServer();
    server.once("error", fail);
    server.listen(0, host, () => {
      const address = server.address();
      const port = typeof address === "object" && address ? address.port : 0;
      server.close(() => done(port));
    });
  });
}
