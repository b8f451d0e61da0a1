// An agent's runner over the runner WebSocket (the ws package: Node 20 has
// no WebSocket client), for the tests against a real server here and for
// the web UI's browser tests and benchmarks.

import WebSocket from "ws";

/** An agent's runner connection: each send waits for the server's ack (or error). */
export class Runner {
  readonly pushes: Record<string, unknown>[] = [];
  private readonly replies: ((r: Record<string, unknown>) => void)[] = [];
  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const m = JSON.parse((data as Buffer).toString()) as Record<string, unknown>;
      if (m["type"] === "ack" || (m["type"] === "error" && this.replies.length > 0)) this.replies.shift()?.(m);
      else this.pushes.push(m);
    });
  }

  static async connect(baseUrl: string, conversationId: string, agentId: string): Promise<Runner> {
    const ws = new WebSocket(baseUrl.replace(/^http/, "ws") + `/v1/conversations/${conversationId}/runner?agentId=${agentId}`);
    const r = new Runner(ws); // listening before it opens: a prompt may come with the handshake
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return r;
  }

  /** Sends one frame and returns the seq the server acked it with. */
  async send(frame: Record<string, unknown>): Promise<number> {
    const reply = new Promise<Record<string, unknown>>((r) => this.replies.push(r));
    this.ws.send(JSON.stringify(frame));
    const r = await reply;
    if (r["type"] !== "ack") throw new Error(`runner frame ${JSON.stringify(frame)}: ${JSON.stringify(r)}`);
    return r["seq"] as number;
  }

  create(id: string, replyTo?: string): Promise<number> {
    return this.send({ type: "message.create", turnId: id, ...(replyTo ? { replyTo } : {}) });
  }

  text(id: string, delta: string): Promise<number> {
    return this.send({ type: "message.part.text-delta", turnId: id, delta });
  }

  tool(id: string, callId: string, status: string, extra: Record<string, unknown> = {}): Promise<number> {
    return this.send({ type: "message.part.tool-update", turnId: id, callId, toolName: "search", status, ...extra });
  }

  finalize(id: string, reason = "end_turn"): Promise<number> {
    return this.send({ type: "message.finalize", turnId: id, reason });
  }

  close(): void {
    this.ws.close();
  }
}
