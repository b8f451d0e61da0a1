import { describe, expect, it } from "vitest";
import type { Frame, Init, Message, MessagePage, ParleyClient, ParleyEvent, QueuedPrompt, View } from "@parleyhq/client";
import { LiveView } from "../src/lib/live";
import { conv, ev, msg, msgEv } from "./helpers";

/**
 * A stand-in for the client: a stream whose frames the test pushes, and
 * pages of messages and events read from arrays, counting the reads.
 */
function fakeClient(all: Message[], log: ParleyEvent[]) {
  const frames: Frame[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  const reads: string[] = [];
  const client = {
    subscribe: () => ({
      close: () => {
        closed = true;
        wake?.();
      },
      async *[Symbol.asyncIterator]() {
        for (;;) {
          while (frames.length === 0 && !closed) await new Promise<void>((r) => (wake = r));
          if (closed) return;
          yield frames.shift()!;
        }
      },
    }),
    messages: (_id: string, o: { after?: number; limit?: number }): Promise<MessagePage> => {
      reads.push(`messages after ${o.after}`);
      const after = o.after ?? 0;
      const page = all.filter((m) => m.seq > after).slice(0, o.limit ?? 100);
      const last = page[page.length - 1];
      return Promise.resolve(page.length === (o.limit ?? 100) && last ? { messages: page, nextAfter: last.seq } : { messages: page });
    },
    events: (_id: string, o: { after?: number; limit?: number }) => {
      reads.push(`events after ${o.after}`);
      const page = log.filter((e) => e.seq > (o.after ?? 0)).slice(0, o.limit ?? 100);
      const last = page[page.length - 1];
      return Promise.resolve(page.length === (o.limit ?? 100) && last ? { events: page, nextAfter: last.seq } : { events: page });
    },
    promptQueue: () => Promise.resolve({ prompts: [] as QueuedPrompt[], asOf: 0, exact: true }),
    conversation: (): Promise<View> => Promise.reject(new Error("not read in these tests")),
  };
  return {
    client: client as unknown as ParleyClient,
    reads,
    push(f: Frame) {
      frames.push(f);
      wake?.();
    },
  };
}

function init(position: number, messages: Message[]): Frame {
  const i: Init = {
    recovered: false,
    position: { seq: position, epoch: "e" },
    conversation: conv({ epoch: "e" }),
    head: { lastSeq: position, epoch: "e", lastTurn: 1, openTurn: null, claim: null, closed: false, lastClosedSeq: 0 },
    guidance: null,
    messages,
  };
  return { type: "init", init: i };
}

/** A scheduler whose frames run when the test says. */
function manualFrames() {
  let queued: (() => void)[] = [];
  return {
    schedule: (cb: () => void) => {
      queued.push(cb);
      return () => (queued = queued.filter((x) => x !== cb));
    },
    run() {
      const q = queued;
      queued = [];
      for (const f of q) f();
    },
  };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("LiveView", () => {
  // 1000 messages at seqs 10, 20, …, 10000 (the log between them: text deltas).
  const all = Array.from({ length: 1000 }, (_, i) => msg({ id: `m${i}`, seq: 10 * (i + 1), turn: i + 1 }));

  it("folds what arrives between two frames at once", async () => {
    const f = fakeClient(all, []);
    const frames = manualFrames();
    const live = new LiveView(f.client, "c", { schedule: frames.schedule, flow: false });
    let changes = 0;
    live.subscribe(() => changes++);
    const last = msg({ id: "s", seq: 10001, status: "streaming", parts: [], content: "", updatedSeq: 10001 });
    f.push(init(10001, [last]));
    for (let i = 0; i < 300; i++) f.push({ type: "event", event: ev(10002 + i, "chunk", { messageId: "s", content: "x" }) });
    await tick();
    expect(changes).toBe(0);
    frames.run();
    expect(live.getSnapshot().state.messages[0]!.content).toBe("x".repeat(300));
    expect(changes).toBeLessThanOrEqual(2); // the fold, and the queue read it starts
    live.close();
  });

  it("reads older messages before the first one held, in spans that adapt, until the start", async () => {
    const f = fakeClient(all, []);
    const frames = manualFrames();
    const live = new LiveView(f.client, "c", { schedule: frames.schedule, flow: false });
    f.push(init(10000, all.slice(-100)));
    await tick();
    frames.run();
    expect(live.getSnapshot().state.messages.length).toBe(100);
    await live.loadOlder();
    const held = live.getSnapshot().state.messages;
    expect(held.length).toBeGreaterThan(100);
    expect(held.map((m) => m.seq)).toEqual([...held.map((m) => m.seq)].sort((a, b) => a - b));
    expect(new Set(held.map((m) => m.id)).size).toBe(held.length);
    expect(live.getSnapshot().older.done).toBe(false);
    // Jumping to the third message reads on until it is held (and no further)…
    await live.loadUntil(30);
    expect(live.getSnapshot().state.messages[0]!.id).toBe("m2");
    expect(live.getSnapshot().older.done).toBe(false);
    // …and the next read reaches the start.
    await live.loadOlder();
    expect(live.getSnapshot().state.messages.map((m) => m.id).slice(0, 3)).toEqual(["m0", "m1", "m2"]);
    expect(live.getSnapshot().state.messages.length).toBe(1000);
    expect(live.getSnapshot().older.done).toBe(true);
    live.close();
  });

  it("does not bring back a message a revert removed while an older page was read", async () => {
    const f = fakeClient(all, []);
    const frames = manualFrames();
    const live = new LiveView(f.client, "c", { schedule: frames.schedule, flow: false });
    f.push(init(10000, all.slice(-10)));
    await tick();
    frames.run();
    f.push({ type: "event", event: ev(10001, "messages.removed", { messageIds: ["m985"] }) });
    await tick();
    frames.run();
    await live.loadOlder();
    expect(live.getSnapshot().state.messages.some((m) => m.id === "m985")).toBe(false);
    expect(live.getSnapshot().state.messages.some((m) => m.id === "m984")).toBe(true);
    live.close();
  });

  it("reads the flow's window of the log, then adds the live events after it", async () => {
    const log = [msgEv(msg({ id: "a", seq: 2, turn: 1 })), ev(3, "chunk", { messageId: "a", content: "x" }), ev(4, "prompt.dispatched", { id: "a", runner: "b" }), msgEv(msg({ id: "b", seq: 5, turn: 2, agentId: "b" }))];
    const f = fakeClient([], log);
    const frames = manualFrames();
    const live = new LiveView(f.client, "c", { schedule: frames.schedule });
    f.push(init(5, []));
    f.push({ type: "event", event: msgEv(msg({ id: "c", seq: 6, turn: 3 })) });
    f.push({ type: "event", event: ev(7, "chunk", { messageId: "c", content: "y" }) });
    await tick();
    frames.run();
    await tick();
    await tick();
    const flow = live.getSnapshot().flow;
    expect(flow.events.map((e) => e.seq)).toEqual([2, 4, 5, 6]); // chunks take no place
    expect(flow.after).toBe(0);
    expect(flow.loading).toBe(false);
    expect(f.reads).toContain("events after 0");
    live.close();
  });

  it("starts the flow with the latest part of a long log, and reads earlier parts when asked", async () => {
    // 6000 events: a message every 100 seqs, text deltas between.
    const log: ParleyEvent[] = [];
    for (let seq = 1; seq <= 6000; seq++) {
      log.push(seq % 100 === 0 ? msgEv(msg({ id: `m${seq}`, seq, turn: seq / 100 })) : ev(seq, "chunk", { messageId: "x", content: "y" }));
    }
    const f = fakeClient([], log);
    const frames = manualFrames();
    const live = new LiveView(f.client, "c", { schedule: frames.schedule });
    f.push(init(6000, []));
    await tick();
    frames.run();
    for (let i = 0; i < 20 && live.getSnapshot().flow.loading; i++) await tick();
    let flow = live.getSnapshot().flow;
    expect(flow.after).toBe(2000);
    expect(flow.events.map((e) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => 2100 + 100 * i));
    await live.loadEarlierFlow();
    flow = live.getSnapshot().flow;
    expect(flow.after).toBe(0);
    expect(flow.events.length).toBe(60);
    expect(flow.events[0]!.seq).toBe(100);
    live.close();
  });
});
