// The fixed connection sequence of the instruction-count benchmark (callgrind.ts), run outside
// valgrind as the captured generator user: `count` connections to host:port, strictly one after
// the other (the next opens only once the previous one has closed), each sending one small
// HTTP/1.1 request with `Connection: close`, reading the whole response and closing. One at a time, so the
// sidecar sees the same events in the same order in every run. Prints one JSON line
// {"ok", "failed", "firstError"}; exits 1 when any connection failed.
// With a pause (ms), the client also waits that long after each connection, so the sidecar has
// finished with one connection (its close events, deferred deletes) before the next arrives and
// the two are never handled in the same event-loop wake-up.
//   node bench/envoy/connection_client.mjs <host> <port> <count> [pauseMs]
import net from "node:net";

const [host, portText, countText, pauseText] = process.argv.slice(2);
const port = Number(portText);
const count = Number(countText);
const pauseMs = Number(pauseText ?? 0);
const REQUEST = `GET / HTTP/1.1\r\nHost: ${host}\r\nUser-Agent: callgrind-bench\r\nConnection: close\r\n\r\n`;

/**
 * True once the whole response is in (headers and Content-Length bytes of body). The client
 * closes then, as wrk does: waiting for the server's FIN instead would wait out the pod's HTTP
 * delayed-close timeout (1 s) on every connection.
 */
function complete(text) {
  const end = text.indexOf("\r\n\r\n");
  if (end < 0) return false;
  const length = /\r\ncontent-length:\s*(\d+)/i.exec(text.slice(0, end));
  return length !== null && text.length - (end + 4) >= Number(length[1]);
}

function once() {
  return new Promise((done) => {
    const socket = net.connect({ host, port });
    let response = "";
    let settled = false;
    const finish = (error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      done(error ?? (/^HTTP\/1\.[01] 200 /.test(response) ? undefined : `unexpected response: ${JSON.stringify(response.slice(0, 80))}`));
    };
    // Generous: the sidecar runs under callgrind, ~50-100x slower than native.
    const timer = setTimeout(() => finish("timeout after 120 s"), 120_000);
    socket.setEncoding("utf8");
    socket.on("connect", () => socket.write(REQUEST));
    socket.on("data", (chunk) => {
      response += chunk;
      if (complete(response)) finish();
    });
    socket.on("end", () => finish());
    socket.on("error", (error) => finish(error.message));
  });
}

let ok = 0;
let failed = 0;
let firstError;
for (let i = 0; i < count; i++) {
  const error = await once();
  if (pauseMs > 0) await new Promise((resume) => setTimeout(resume, pauseMs));
  if (error === undefined) ok++;
  else {
    failed++;
    firstError ??= error;
  }
}
process.stdout.write(`${JSON.stringify({ ok, failed, firstError })}\n`);
process.exit(failed ? 1 : 0);
