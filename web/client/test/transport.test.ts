// What a browser's WebSocket does that the real server cannot be made to
// do on cue: close with 4404, 4401 or 4403 without an error frame, or fail its
// handshake without saying why.

import { describe, expect, it } from "vitest";
import { ParleyClient, ParleyError, type FetchLike, type Frame, type WebSocketLike } from "../src/index.js";

type Script = (ws: FakeSocket) => void;

/** A WebSocket that plays a script once it is made. */
class FakeSocket {
  static script: Script = () => {};
  static made: string[] = [];
  readonly CONNECTING = 0;
  readonly OPEN = 1;
  readyState = 0;
  onopen: (() => void) | null = null;
  onmessage: ((ev: { data: unknown }) => void) | null = null;
  onclose: ((ev: { code: number; reason: string }) => void) | null = null;
  onerror: (() => void) | null = null;
  constructor(readonly url: string) {
    FakeSocket.made.push(url);
    setTimeout(() => FakeSocket.script(this), 0);
  }
  open(): void {
    this.readyState = 1;
    this.onopen?.();
  }
  send(frame: unknown): void {
    this.onmessage?.({ data: JSON.stringify(frame) });
  }
  close(code = 1005, reason = ""): void {
    if (this.readyState === 3) return;
    this.readyState = 3;
    this.onclose?.({ code, reason });
  }
}

const init = { type: "init", recovered: false, position: { seq: 4, epoch: "e" }, head: { lastSeq: 4 }, guidance: null, messages: [] };

function client(fetch: FetchLike = () => Promise.reject(new Error("no fetch here"))): ParleyClient {
  return new ParleyClient({ baseUrl: "http://127.0.0.1:1", token: "pk_secret", fetch, WebSocket: FakeSocket as unknown as WebSocketLike });
}

describe("a WebSocket stream", () => {
  it.each([
    [4404, "not_found"],
    [4401, "unauthorized"],
    [4403, "forbidden"],
  ])("stops for good when closed with %i", async (code, want) => {
    FakeSocket.made = [];
    FakeSocket.script = (ws) => {
      ws.open();
      ws.send(init);
      ws.close(code, "");
    };
    const sub = client().subscribe("c1", { transport: "ws", minBackoffMs: 1 });
    expect(((await sub.next()).value as Frame).type).toBe("init");
    const err = await sub.next().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe(want);
    expect(FakeSocket.made).toHaveLength(1);
    expect(FakeSocket.made[0]).toBe("ws://127.0.0.1:1/v1/conversations/c1/ws?token=pk_secret");
  });

  it("reconnects after another close, from its position", async () => {
    FakeSocket.made = [];
    FakeSocket.script = (ws) => {
      ws.open();
      ws.send(FakeSocket.made.length === 1 ? init : { ...init, recovered: true });
      ws.send({ conversationId: "c1", seq: 5, type: "trace", turn: 1, finality: "none", ts: null, data: {} });
      ws.close(1013, "try again later");
    };
    const sub = client().subscribe("c1", { transport: "ws", minBackoffMs: 1 });
    const got: string[] = [];
    for (let i = 0; i < 3; i++) {
      const f = (await sub.next()).value as Frame;
      got.push(f.type === "event" ? `event ${f.event.seq}` : f.type);
    }
    sub.close();
    expect(got).toEqual(["init", "event 5", "init"]); // the second connection's event 5 was yielded already
    expect(FakeSocket.made[1]).toBe("ws://127.0.0.1:1/v1/conversations/c1/ws?after=5&epoch=e&token=pk_secret");
  });

  it("asks over HTTP why a handshake failed: a 404 stops it, a network failure does not", async () => {
    FakeSocket.script = (ws) => ws.close(1006);
    let calls = 0;
    const notFound: FetchLike = () => {
      calls++;
      return Promise.resolve(new Response(JSON.stringify({ error: { code: "not_found", message: "conversation c1 not found" } }), { status: 404 }));
    };
    const sub = client(notFound).subscribe("c1", { transport: "ws", minBackoffMs: 1 });
    await expect(sub.next()).rejects.toMatchObject({ status: 404, code: "not_found" });
    expect(calls).toBe(1);
    const down: FetchLike = () => {
      calls++;
      return Promise.reject(new TypeError("fetch failed"));
    };
    calls = 0;
    const statuses: string[] = [];
    const again = client(down).subscribe("c1", { transport: "ws", minBackoffMs: 1, maxBackoffMs: 2, onStatus: (s) => statuses.push(s.state) });
    const pending = again.next();
    while (calls < 3) await new Promise((r) => setTimeout(r, 5));
    again.close();
    expect((await pending).done).toBe(true);
    expect(statuses.filter((s) => s === "waiting").length).toBeGreaterThanOrEqual(3);
  });

  it("skips an event it yielded already, and reconnects at a gap", async () => {
    FakeSocket.made = [];
    const ev = (seq: number) => ({ conversationId: "c1", seq, type: "trace", turn: 1, finality: "none", ts: null, data: {} });
    FakeSocket.script = (ws) => {
      ws.open();
      if (FakeSocket.made.length === 1) {
        ws.send(init);
        ws.send(ev(5));
        ws.send(ev(5)); // again: skipped, on the same connection
        ws.send(ev(6));
        ws.send(ev(8)); // 7 is missing: reconnect from 6
      } else {
        ws.send({ ...init, recovered: true, position: { seq: 6, epoch: "e" } });
        ws.send(ev(7));
        ws.send(ev(8));
      }
    };
    const sub = client().subscribe("c1", { transport: "ws", minBackoffMs: 1 });
    const got: string[] = [];
    for (let i = 0; i < 6; i++) {
      const f = (await sub.next()).value as Frame;
      got.push(f.type === "event" ? `event ${f.event.seq}` : f.type);
    }
    sub.close();
    expect(got).toEqual(["init", "event 5", "event 6", "init", "event 7", "event 8"]);
    expect(FakeSocket.made).toHaveLength(2);
    expect(FakeSocket.made[1]).toContain("after=6&epoch=e");
  });
});
