// A long-lived captured connection for live-update tests: it reads the server's banner, then
// each `roundTrip` sends bytes and waits for the echo, so a test can prove the same connection
// keeps flowing across a configuration update.
import { connect, type Socket } from "node:net";

export class OpenConnection {
  private received = Buffer.alloc(0);
  private waiters: Array<() => void> = [];
  closed = false;

  private constructor(private readonly socket: Socket) {
    socket.on("data", (chunk: Buffer) => {
      this.received = Buffer.concat([this.received, chunk]);
      for (const wake of this.waiters.splice(0)) wake();
    });
    socket.on("error", () => undefined);
    socket.on("close", () => {
      this.closed = true;
      for (const wake of this.waiters.splice(0)) wake();
    });
  }

  static open(host: string, port: number, localAddress: string): Promise<OpenConnection> {
    return new Promise((done, fail) => {
      const socket = connect({ host, port, localAddress });
      socket.once("connect", () => done(new OpenConnection(socket)));
      socket.once("error", fail);
    });
  }

  /** Waits until `count` bytes arrived (or the connection closed / timed out); returns and consumes them. */
  async read(count: number, timeoutMs = 5000): Promise<string> {
    const deadline = Date.now() + timeoutMs;
    while (this.received.length < count && !this.closed && Date.now() < deadline) {
      await new Promise<void>((wake) => {
        this.waiters.push(wake);
        setTimeout(wake, 100);
      });
    }
    const text = this.received.subarray(0, count).toString();
    this.received = this.received.subarray(Math.min(count, this.received.length));
    return text;
  }

  /** Sends `text` and returns what came back in the same number of bytes (an echo server). */
  async roundTrip(text: string): Promise<string> {
    this.socket.write(text);
    return this.read(Buffer.byteLength(text));
  }

  close(): void {
    this.socket.destroy();
  }
}
