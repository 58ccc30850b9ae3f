// The channel's routes (/delta/<t>, /snapshot/<t>) and /metrics over plain HTTP, for in-process
// tests of what the controller answers: the TypeScript host's proxy_http_call speaks no TLS.
// The feed itself never serves /delta in clear (feed/src/channel.ts); its mutual TLS and who may
// read what are tested through the real feed in channel_auth.test.ts and channel_impostor.test.ts.
import { createServer, type Server } from "node:http";
import { routeChannel } from "../../feed/src/channel.js";
import type { FeedController } from "../../feed/src/controller.js";

export interface PlainChannel {
  port: number;
  close(): Promise<void>;
}

export async function startPlainChannel(controller: FeedController, maxWaitSeconds: number): Promise<PlainChannel> {
  const server: Server = createServer((req, res) => {
    if (req.url === "/metrics") void controller.metricsText().then((text) => res.writeHead(200, { "content-type": "text/plain" }).end(text));
    else routeChannel(controller, req, res, maxWaitSeconds);
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      server.closeAllConnections();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
