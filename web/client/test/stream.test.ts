// Subscriptions against the real server: resume by position across cut
// connections and a restart, on both transports; backoff; stopping for
// good; the bounds on frames and on what waits for the reader.

import { describe, expect, inject, it } from "vitest";
import {
  BufferFullError,
  ConversationFold,
  FrameTooLargeError,
  ParleyClient,
  ParleyError,
  type Frame,
  type StreamStatus,
  type Subscription,
  type Transport,
} from "../src/index.js";
import { canonical } from "./fixtures.js";
import { NodeWebSocket, Proxy, Runner, conversation, shared, until } from "./helpers.js";
import { startServer } from "./server.js";

/** Reads a subscription in the background into frames; done holds how it ended. */
function read(sub: Subscription) {
  const frames: Frame[] = [];
  const r = { frames, error: undefined as unknown, ended: false, done: Promise.resolve() };
  r.done = (async () => {
    try {
      for await (const f of sub) frames.push(f);
    } catch (err) {
      r.error = err;
    } finally {
      r.ended = true;
    }
  })();
  return r;
}

const seqs = (fs: Frame[]) => fs.flatMap((f) => (f.type === "event" ? [f.event.seq] : []));
const lastSeq = async (c: ParleyClient, id: string) => (await c.conversation(id)).head.lastSeq;

describe.each<Transport>(["sse", "ws"])("over %s", (transport) => {
  const ws = transport === "ws" ? { WebSocket: NodeWebSocket } : {};

  it("yields every event once and in order across cut connections, and its fold is the server's", async () => {
    const direct = shared();
    const id = await conversation(direct);
    const proxy = await Proxy.start(inject("serverUrl"));
    const c = new ParleyClient({ baseUrl: proxy.url, ...ws });
    const statuses: StreamStatus[] = [];
    const sub = c.subscribe(id, { transport, minBackoffMs: 5, maxBackoffMs: 50, onStatus: (s) => statuses.push(s) });
    const r = read(sub);
    const run = await Runner.connect(inject("serverUrl"), id, "alice");
    let cuts = 0;
    try {
      await until(() => r.frames.length > 0, "the init");
      for (let m = 0; m < 4; m++) {
        await run.create(`r${m}`);
        for (let i = 0; i < 15; i++) {
          await run.text(`r${m}`, `word${i} `);
          if (i % 5 === 2) {
            // Cut a live connection, while the stream is under way.
            await until(() => statuses.at(-1)?.state === "live", "a live connection");
            proxy.cut();
            cuts++;
          }
          if (i === 7) await run.tool(`r${m}`, "c1", "running", { args: { q: m } });
        }
        await run.tool(`r${m}`, "c1", "completed", { result: { hits: 1 } });
        await run.finalize(`r${m}`);
      }
      const head = await lastSeq(direct, id);
      await until(() => (sub.position?.seq ?? 0) >= head, "the stream to catch up");
      const got = seqs(r.frames);
      expect(got).toEqual(Array.from({ length: head - 1 }, (_, i) => i + 2)); // from the snapshot at seq 1
      expect(cuts).toBe(12);
      const inits = r.frames.filter((f) => f.type === "init");
      expect(inits.length).toBeGreaterThan(cuts);
      expect(sub.connectionCount).toBeGreaterThanOrEqual(inits.length);
      expect(inits.slice(1).every((f) => f.type === "init" && f.init.recovered)).toBe(true);
      expect(statuses.some((s) => s.state === "waiting")).toBe(true);
      // What it yielded, folded, is what the server has.
      const fold = new ConversationFold();
      for (const f of r.frames) fold.apply(f);
      const server = (await direct.messages(id)).messages;
      expect(fold.messages.map(canonical)).toEqual(server.map(canonical));
    } finally {
      sub.close();
      await r.done;
      run.close();
      await proxy.close();
    }
  });

  it("resumes from a position given, and from the log's start", async () => {
    const c = new ParleyClient({ baseUrl: inject("serverUrl"), ...ws });
    const id = await conversation(c);
    for (let i = 0; i < 5; i++) await c.postMessage(id, { agentId: "carol", content: `m${i}` });
    const epoch = (await c.conversation(id)).conversation.epoch;
    for (const [from, first] of [[{ seq: 3, epoch }, 4], [{ seq: 0 }, 1], [{ seq: 4 }, 5]] as const) {
      const sub = c.subscribe(id, { transport, from });
      const it = sub[Symbol.asyncIterator]();
      const init = (await it.next()).value as Frame;
      expect(init.type === "init" && init.init.recovered).toBe(true);
      const next = (await it.next()).value as Frame;
      expect(next.type === "event" && next.event.seq).toBe(first);
      await it.return!();
      expect((await sub.next()).done).toBe(true);
    }
    // A position in another epoch gets a snapshot.
    const sub = c.subscribe(id, { transport, from: { seq: 3, epoch: "00000000" } });
    const f = (await sub.next()).value as Frame;
    expect(f.type === "init" && !f.init.recovered && f.init.messages?.length).toBe(5);
    sub.close();
  });

  it("reconnects across a restart of the server and resumes", async () => {
    const server = await startServer(inject("parleyBinary"));
    let again: Awaited<ReturnType<typeof startServer>> | undefined;
    const c = new ParleyClient({ baseUrl: server.url, ...ws });
    const id = await conversation(c);
    const statuses: StreamStatus[] = [];
    const sub = c.subscribe(id, { transport, minBackoffMs: 20, maxBackoffMs: 200, onStatus: (s) => statuses.push(s) });
    const r = read(sub);
    try {
      await until(() => r.frames.length === 1, "the init");
      await c.postMessage(id, { agentId: "carol", content: "before" });
      await until(() => sub.position?.seq === 2, "the first message");
      await server.stop(); // it ends the stream with an `unavailable` error frame
      again = await startServer(inject("parleyBinary"), { db: server.db, addr: server.addr });
      await c.postMessage(id, { agentId: "carol", content: "after" });
      await until(() => sub.position?.seq === 3, "the message written after the restart");
      expect(seqs(r.frames)).toEqual([2, 3]);
      const waits = statuses.filter((s) => s.state === "waiting");
      expect(waits.length).toBeGreaterThan(0);
      expect(statuses.filter((s) => s.state === "live").map((s) => s.state === "live" && s.recovered)).toEqual([false, true]);
    } finally {
      sub.close();
      await r.done;
      await (again ?? server).stop();
    }
    expect(r.error).toBeUndefined();
  });

  it("stops for good on an unknown conversation, without retrying", async () => {
    const c = new ParleyClient({ baseUrl: inject("serverUrl"), ...ws });
    const sub = c.subscribe("no-such-conversation", { transport, minBackoffMs: 1 });
    const err = await sub.next().then(() => undefined, (e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect((err as ParleyError).code).toBe("not_found");
    expect(sub.connectionCount).toBe(1);
    expect((await sub.next()).done).toBe(true);
  });

  it("stops for good when the conversation is deleted", async () => {
    const c = new ParleyClient({ baseUrl: inject("serverUrl"), ...ws });
    const id = await conversation(c);
    const statuses: StreamStatus[] = [];
    const sub = c.subscribe(id, { transport, minBackoffMs: 1, onStatus: (s) => statuses.push(s) });
    const r = read(sub);
    await until(() => r.frames.length === 1, "the init");
    await c.deleteConversation(id);
    await r.done;
    expect(r.error).toBeInstanceOf(ParleyError);
    expect((r.error as ParleyError).code).toBe("not_found");
    expect(sub.connectionCount).toBe(1);
    expect(statuses.at(-1)?.state).toBe("stopped");
  });
});

describe("tokens", () => {
  it("stop for good on a bad token and when the token is revoked", async () => {
    const server = await startServer(inject("parleyBinary"));
    try {
      const open = new ParleyClient({ baseUrl: server.url });
      const admin = new ParleyClient({ baseUrl: server.url, token: (await open.createToken({ kind: "admin" })).token! });
      const id = await conversation(admin);
      const bad = new ParleyClient({ baseUrl: server.url, token: "pk_not-a-token" });
      for (const transport of ["sse", "ws"] as const) {
        const sub = new ParleyClient({ baseUrl: server.url, token: "pk_not-a-token", WebSocket: NodeWebSocket }).subscribe(id, { transport, minBackoffMs: 1 });
        const err = await sub.next().then(() => undefined, (e: unknown) => e);
        expect((err as ParleyError).code, transport).toBe("unauthorized");
        expect(sub.connectionCount, transport).toBe(1);
      }
      await expect(bad.conversation(id)).rejects.toMatchObject({ status: 401, code: "unauthorized" });
      for (const transport of ["sse", "ws"] as const) {
        const viewer = await admin.createToken({ kind: "viewer" });
        const c = new ParleyClient({ baseUrl: server.url, token: viewer.token!, WebSocket: NodeWebSocket });
        const sub = c.subscribe(id, { transport, minBackoffMs: 1 });
        const r = read(sub);
        await until(() => r.frames.length === 1, "the init");
        await admin.revokeToken(viewer.id);
        await r.done;
        expect((r.error as ParleyError).code, transport).toBe("unauthorized");
        expect(sub.connectionCount, transport).toBe(1);
      }
    } finally {
      await server.stop();
    }
  });
});

describe("backoff", () => {
  it("waits longer after each failure, within its bounds, and starts over once connected", async () => {
    const direct = shared();
    const id = await conversation(direct);
    const proxy = await Proxy.start(inject("serverUrl"));
    proxy.refuse(true);
    const statuses: StreamStatus[] = [];
    const sub = new ParleyClient({ baseUrl: proxy.url }).subscribe(id, { minBackoffMs: 10, maxBackoffMs: 80, onStatus: (s) => statuses.push(s) });
    const r = read(sub);
    try {
      await until(() => statuses.filter((s) => s.state === "waiting").length >= 6, "six failures");
      proxy.refuse(false);
      await until(() => statuses.some((s) => s.state === "live"), "a connection");
      const waits = statuses.flatMap((s) => (s.state === "waiting" ? [s] : []));
      waits.forEach((w, i) => {
        expect(w.attempt).toBe(i);
        const d = Math.min(80, 10 * 2 ** i);
        expect(w.delayMs).toBeGreaterThanOrEqual(d / 2);
        expect(w.delayMs).toBeLessThanOrEqual(d);
      });
      proxy.cut();
      await until(() => statuses.filter((s) => s.state === "live").length === 2, "a reconnect");
      const after = statuses.slice(statuses.findIndex((s) => s.state === "live")).find((s) => s.state === "waiting");
      expect(after).toMatchObject({ attempt: 0 });
    } finally {
      sub.close();
      await r.done;
      await proxy.close();
    }
    expect(r.error).toBeUndefined();
  });

  it("waits as long as a 429 asks", async () => {
    const server = await startServer(inject("parleyBinary"), { args: ["-max-token-connections", "1"] });
    try {
      const c = new ParleyClient({ baseUrl: server.url });
      const id = await conversation(c);
      const first = read(c.subscribe(id));
      await until(() => first.frames.length === 1, "the first stream");
      const statuses: StreamStatus[] = [];
      const second = c.subscribe(id, { minBackoffMs: 1, onStatus: (s) => statuses.push(s) });
      const r = read(second);
      await until(() => statuses.some((s) => s.state === "waiting"), "a refusal");
      const w = statuses.find((s) => s.state === "waiting") as Extract<StreamStatus, { state: "waiting" }>;
      expect(w.error).toMatchObject({ status: 429, code: "rate_limited" });
      expect(w.delayMs).toBeGreaterThanOrEqual(((w.error as ParleyError).retryAfterSeconds ?? 1) * 1000);
      second.close();
      await r.done;
      expect(r.error).toBeUndefined();
    } finally {
      await server.stop();
    }
  });
});

describe("bounds", () => {
  it("drops a connection whose frame is over the limit, and does not stop", async () => {
    const c = shared();
    const id = await conversation(c);
    const statuses: StreamStatus[] = [];
    const sub = c.subscribe(id, { maxFrameBytes: 4096, minBackoffMs: 5, maxBackoffMs: 20, onStatus: (s) => statuses.push(s) });
    const r = read(sub);
    await until(() => r.frames.length === 1, "the init");
    await c.postMessage(id, { agentId: "carol", content: "x".repeat(8000) });
    await until(() => statuses.filter((s) => s.state === "waiting").length >= 2, "two refusals");
    const w = statuses.find((s) => s.state === "waiting") as Extract<StreamStatus, { state: "waiting" }>;
    expect(w.error).toBeInstanceOf(FrameTooLargeError);
    expect(seqs(r.frames)).toEqual([]);
    sub.close();
    await r.done;
    expect(r.error).toBeUndefined();
  });

  it("over WebSocket, lets at most maxBufferedBytes wait for the reader, then resumes losing nothing", async () => {
    const c = new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
    const id = await conversation(c);
    const statuses: StreamStatus[] = [];
    const sub = c.subscribe(id, { transport: "ws", maxBufferedBytes: 4000, minBackoffMs: 5, onStatus: (s) => statuses.push(s) });
    const first = await sub.next(); // connected; now nobody reads
    expect(first.value?.type).toBe("init");
    for (let i = 0; i < 40; i++) await c.postMessage(id, { agentId: "carol", content: `message ${i} ` + "y".repeat(200) });
    const head = await lastSeq(c, id);
    const got: number[] = [];
    while ((sub.position?.seq ?? 0) < head) {
      const f = (await sub.next()).value as Frame;
      if (f.type === "event") got.push(f.event.seq);
    }
    sub.close();
    expect(got).toEqual(Array.from({ length: head - 1 }, (_, i) => i + 2));
    expect(statuses.some((s) => s.state === "waiting" && s.error instanceof BufferFullError)).toBe(true);
  });
});
