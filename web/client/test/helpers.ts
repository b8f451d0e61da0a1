// What the tests against a real server share: a runner over the runner
// WebSocket (the ws package: Node 20 has no WebSocket client), a TCP proxy
// that can cut connections, and small waits.

import { createServer, connect, type Server as NetServer, type Socket } from "node:net";
import { inject } from "vitest";
import { ParleyClient } from "../src/index.js";

export { Runner } from "./runner.js";
export { NodeWebSocket } from "./ws.js";

/** A client of the shared server. */
export function shared(): ParleyClient {
  return new ParleyClient({ baseUrl: inject("serverUrl") });
}

/** Creates a conversation on the shared server (free turn policy) and returns its id. */
export async function conversation(c: ParleyClient, title = "test"): Promise<string> {
  return (await c.createConversation({ title, turnPolicy: "free" })).conversation.id;
}

/** A TCP proxy to a server whose connections the test can cut, or refuse for a while. */
export class Proxy {
  private readonly sockets = new Set<Socket>();
  private refusing = false;
  accepted = 0;
  private constructor(
    private readonly server: NetServer,
    readonly url: string,
  ) {}

  static async start(target: string): Promise<Proxy> {
    const { hostname, port } = new URL(target);
    const box: { self?: Proxy } = {};
    const server = createServer((client) => {
      const p = box.self!;
      p.accepted++;
      if (p.refusing) {
        client.destroy();
        return;
      }
      const upstream = connect(Number(port), hostname);
      for (const [a, b] of [[client, upstream], [upstream, client]] as const) {
        a.pipe(b);
        a.on("error", () => b.destroy());
        a.on("close", () => b.destroy());
        p.sockets.add(a);
        a.on("close", () => p.sockets.delete(a));
      }
    });
    await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
    const addr = server.address() as { port: number };
    box.self = new Proxy(server, `http://127.0.0.1:${addr.port}`);
    return box.self;
  }

  /** Cuts every connection open now. */
  cut(): void {
    for (const s of this.sockets) s.destroy();
  }

  /** Refuses (accepts and drops) every connection until told otherwise. */
  refuse(on: boolean): void {
    this.refusing = on;
    if (on) this.cut();
  }

  async close(): Promise<void> {
    this.cut();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** Waits until cond holds, checking every 10 ms, for at most ms. */
export async function until(cond: () => boolean | Promise<boolean>, what: string, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}
