#!/usr/bin/env node
// A server-first demo backend: greets with its name, then echoes. Usage: NAME HOST PORT
import { createServer } from "node:net";

const [name, host, port] = process.argv.slice(2);
createServer({ allowHalfOpen: true }, (socket) => {
  socket.on("error", () => socket.destroy());
  socket.write(`${name}\n`);
  socket.pipe(socket);
}).listen(Number(port), host, () => console.log(`${name} listening on ${host}:${port}`));
