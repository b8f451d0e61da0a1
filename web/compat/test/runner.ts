// The agent "helper", as a runner attached to one conversation over the
// runner WebSocket (the ws package: Node 20 has no WebSocket client). Each
// frame it sends waits for the server's ack.

import WebSocket from "ws";

type Frame = Record<string, unknown>;

export class Runner {
  private readonly pushes: Frame[] = [];
  private readonly waiting: ((f: Frame) => void)[] = [];
  private readonly replies: ((f: Frame) => void)[] = [];

  private constructor(private readonly ws: WebSocket) {
    ws.on("message", (data) => {
      const f = JSON.parse((data as Buffer).toString()) as Frame;
      if (f["type"] === "ack" || (f["type"] === "error" && this.replies.length > 0)) this.replies.shift()?.(f);
      else if (this.waiting.length > 0) this.waiting.shift()?.(f);
      else this.pushes.push(f);
    });
  }

  /** Attaches as agent `agentId` (an admin token acting for it) to conversation `id`. */
  static async attach(baseUrl: string, adminToken: string, id: string, agentId = "helper"): Promise<Runner> {
    const u = `${baseUrl.replace(/^http/, "ws")}/v1/conversations/${encodeURIComponent(id)}/runner?agentId=${agentId}`;
    const ws = new WebSocket(u, { headers: { Authorization: "Bearer " + adminToken } });
    const r = new Runner(ws); // listening before it opens: a prompt may come with the handshake
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return r;
  }

  /** The next frame the server pushes (a prompt, an abort). */
  next(): Promise<Frame> {
    const f = this.pushes.shift();
    return f ? Promise.resolve(f) : new Promise((r) => this.waiting.push(r));
  }

  /** Sends one frame and waits for its ack. */
  async send(frame: Frame): Promise<void> {
    const reply = new Promise<Frame>((r) => this.replies.push(r));
    this.ws.send(JSON.stringify(frame));
    const r = await reply;
    if (r["type"] !== "ack") throw new Error(`runner frame ${JSON.stringify(frame)}: ${JSON.stringify(r)}`);
  }

  close(): void {
    this.ws.close();
  }
}

/** The answer the tests' runner gives, frame by frame: text, a search that completes, more text. */
export function scriptedAnswer(id: string): Frame[] {
  return [
    { type: "message.create", turnId: id },
    { type: "message.part.text-delta", turnId: id, delta: "Let me " },
    { type: "message.part.text-delta", turnId: id, delta: "look that up. " },
    { type: "message.part.tool-update", turnId: id, callId: "c1", toolName: "search", status: "running", args: { q: "6 x 7", n: 1 } },
    { type: "message.part.tool-update", turnId: id, callId: "c1", toolName: "search", status: "completed", result: { hits: ["42"] } },
    { type: "message.part.text-delta", turnId: id, delta: "It is " },
    { type: "message.part.text-delta", turnId: id, delta: "42 — «forty-two»." },
    { type: "message.finalize", turnId: id, reason: "end_turn" },
    { type: "complete" },
  ];
}
