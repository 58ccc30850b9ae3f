// The channel's routes (/delta/<t>, /snapshot/<t>) and /metrics over plain HTTP, for in-process
// tests of what the controller answers: the TypeScript host's proxy_http_call speaks no TLS.
// It speaks the channel's own HTTP layer (channel_http.ts), without asking who calls. The feed
// itself never serves /delta in clear without its sidecar's word (feed/src/channel.ts); its
// mutual TLS and who may read what are tested through the real feed in channel_auth.test.ts
// and channel_impostor.test.ts.
import { createServer, type Server, type Socket } from "node:net";
import { routeChannel } from "../../feed/src/channel.js";
import { ChannelConnection } from "../../feed/src/channel_http.js";
import type { FeedController } from "../../feed/src/controller.js";
import { BUCKETS_BODY_BYTES } from "../../feed/src/http.js";

export interface PlainChannel {
  port: number;
  close(): Promise<void>;
}

export async function startPlainChannel(controller: FeedController, maxWaitSeconds: number): Promise<PlainChannel> {
  const sockets = new Set<Socket>();
  const options = { headersTimeoutMs: 10_000, idleTimeoutMs: (maxWaitSeconds + 60) * 1000, maxBodyBytes: BUCKETS_BODY_BYTES, dropped: () => undefined };
  const server: Server = createServer((socket) => {
    sockets.add(socket);
    socket.once("close", () => sockets.delete(socket));
    new ChannelConnection(
      socket,
      (req, res) => {
        if (req.url === "/metrics") void controller.metricsText().then((text) => res.writeHead(200, { "content-type": "text/plain" }).end(text));
        else routeChannel(controller, req, res, maxWaitSeconds);
      },
      options,
    );
  });
  await new Promise<void>((done) => server.listen(0, "127.0.0.1", () => done()));
  return {
    port: (server.address() as { port: number }).port,
    close: async () => {
      for (const s of sockets) s.destroy();
      await new Promise<void>((done) => server.close(() => done()));
    },
  };
}
