// follow(): the stream folded, with what it leaves out read over HTTP,
// against the real server.

import { describe, expect, inject, it } from "vitest";
import { ParleyClient, follow, type LiveSnapshot, type Message, type MessagePage, type QueuedPrompt, type View } from "../src/index.js";
import { canonical } from "./fixtures.js";
import { NodeWebSocket, Runner, conversation, until } from "./helpers.js";
import { ev, manualFrames, msg, pushedStream, snapshot } from "./makers.js";

it.each(["sse", "ws"] as const)("follows a conversation over %s: summarized messages, the queue and the head are read as needed", async (transport) => {
  const c = new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
  const id = await conversation(c);
  const run = await Runner.connect(inject("serverUrl"), id, "alice");
  await run.create("big");
  await run.text("big", "x".repeat(140 << 10)); // over 128 KiB: a snapshot summarizes it
  await c.prompt(id, { agentId: "human", content: "waiting ü" });
  const errors: unknown[] = [];
  const live = follow(c, id, { transport, onError: (e) => errors.push(e) });
  const seen: LiveSnapshot[] = [];
  live.subscribe(() => seen.push(live.getSnapshot()));
  try {
    const serverMessages = async () => (await c.messages(id)).messages.map(canonical);
    const shows = async () => {
      const s = live.getSnapshot().state;
      return s.messages.map(canonical).join() === (await serverMessages()).join() && s.queue.known && !s.headStale;
    };
    await until(shows, "the server's messages");
    const first = seen.find((s) => s.state.messages.length > 0)!;
    expect(first.state.messages[0]!.summarized).toBeDefined(); // the snapshot's, then read whole
    expect(live.getSnapshot().state.messages[0]!.content).toHaveLength(140 << 10);
    expect(live.getSnapshot().state.queue.prompts.map((p) => p.content)).toEqual(["waiting ü"]);
    // The stream goes on from the copy read.
    await run.text("big", " and more");
    await run.tool("big", "c1", "running", { args: { q: 1 } });
    await run.finalize("big");
    await until(shows, "the finished message");
    const s = live.getSnapshot();
    expect(s.state.messages[0]!.status).toBe("complete");
    expect(s.state.head).toEqual((await c.conversation(id)).head);
    expect(s.status.state).toBe("live");
    expect(s.state.queue.prompts.map((p) => p.content)).toEqual(["waiting ü"]);
    expect(errors).toEqual([]);
  } finally {
    live.close();
    await live.done;
    run.close();
  }
  expect(live.getSnapshot().status.state).toBe("closed");
});

it("shows a v1 runner's streamed text as it comes, then the row that holds it; so do followers that join mid-answer", async () => {
  const c = new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
  const id = (await c.createConversation({ title: "v1", participants: ["alice"], members: ["human"], messageFormat: "v1" })).conversation.id;
  const run = await Runner.connect(inject("serverUrl"), id, "alice");
  const live = follow(c, id, { transport: "sse" });
  const all = [live];
  try {
    await until(() => live.getSnapshot().status.state === "live", "the stream");
    await c.prompt(id, { agentId: "human", content: "what is there?" });
    await until(() => run.pushes.some((p) => p["type"] === "prompt"), "the prompt");
    const shownBy = (l: typeof live) => {
      const s = l.getSnapshot().state;
      const answer = s.messages.filter((m) => m.role !== "user").map((m) => `${m.role}:${m.content}`);
      return [s.streaming.map((t) => `${t.agentId}@${t.seq}-${t.updatedSeq}:${t.content}`).join(" "), answer.join(" ")];
    };
    const shown = () => shownBy(live).map((s) => s.replace(/@\d+-\d+/g, ""));
    // at waits until every follower is at seq, and checks that each shows what the first one does.
    const at = async (seq: number) => {
      for (const l of all) await until(() => (l.getSnapshot().state.position?.seq ?? 0) >= seq, `seq ${seq}`);
      for (const l of all.slice(1)) expect(shownBy(l)).toEqual(shownBy(live));
    };
    await at(await run.send({ type: "stream", content: "Let me " }));
    expect(shown()).toEqual(["alice:Let me ", ""]);
    // Followers that join now get the text so far in their snapshot.
    all.push(follow(c, id, { transport: "ws" }), follow(c, id, { transport: "sse" }));
    await at(await run.send({ type: "stream", content: "look." }));
    expect(shown()).toEqual(["alice:Let me look.", ""]);
    expect(live.getSnapshot().state.streaming[0]!.turnId).not.toBe("");
    await at(await run.send({ type: "result", content: "Let me look." }));
    expect(shown()).toEqual(["", "assistant:Let me look."]);
    await at(await run.send({ type: "stream", content: "Nothing more" }));
    expect(shown()).toEqual(["alice:Nothing more", "assistant:Let me look."]);
    await at(await run.send({ type: "complete" }));
    expect(shown()).toEqual(["", "assistant:Let me look."]); // no row took it: the server holds none of it
  } finally {
    for (const l of all) {
      l.close();
      await l.done;
    }
    run.close();
  }
});

it("reads the prompt queue again rather than take a read that is not exact", async () => {
  const c = new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
  const id = await conversation(c);
  await c.prompt(id, { agentId: "human", content: "the one prompt" });
  const read = c.promptQueue.bind(c);
  let reads = 0;
  // The first read says it is not exact, and holds a prompt that is not there.
  c.promptQueue = async (cid, opts) => {
    const q = await read(cid, opts);
    reads++;
    return reads > 1 ? q : { ...q, prompts: [...q.prompts, { ...q.prompts[0]!, id: "phantom", content: "not there" }], exact: false };
  };
  const live = follow(c, id, { transport: "sse" });
  try {
    await until(() => live.getSnapshot().state.queue.known, "the queue");
    expect(reads).toBe(2);
    expect(live.getSnapshot().state.queue.prompts.map((p) => p.content)).toEqual(["the one prompt"]);
  } finally {
    live.close();
    await live.done;
  }
});

/**
 * A stand-in for the client: a stream whose frames the test pushes, and
 * messages read from an array, counting the reads.
 */
function fakeClient(all: Message[]) {
  const stream = pushedStream();
  const reads: string[] = [];
  const client = {
    subscribe: stream.subscribe,
    messages: (_id: string, o: { after?: number; limit?: number }): Promise<MessagePage> => {
      reads.push(`messages after ${o.after}`);
      const after = o.after ?? 0;
      const page = all.filter((m) => m.seq > after).slice(0, o.limit ?? 100);
      const last = page[page.length - 1];
      return Promise.resolve(page.length === (o.limit ?? 100) && last ? { messages: page, nextAfter: last.seq } : { messages: page });
    },
    message: (_id: string, mid: string): Promise<Message> => {
      reads.push(`message ${mid}`);
      const m = all.find((x) => x.id === mid);
      return m ? Promise.resolve(m) : Promise.reject(new Error("no message " + mid));
    },
    promptQueue: () => Promise.resolve({ prompts: [] as QueuedPrompt[], asOf: 0, exact: true }),
    conversation: (): Promise<View> => Promise.reject(new Error("not read in these tests")),
  };
  return { client: client as unknown as ParleyClient, reads, push: stream.push };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("LiveConversation, batched, reading older messages", () => {
  // 1000 messages at seqs 10, 20, …, 10000 (the log between them: text deltas).
  const all = Array.from({ length: 1000 }, (_, i) => msg({ id: `m${i}`, seq: 10 * (i + 1), turn: i + 1 }));

  it("folds what arrives between two frames at once", async () => {
    const f = fakeClient(all);
    const frames = manualFrames();
    const batches: number[] = [];
    const live = follow(f.client, "c", { schedule: frames.schedule, onFrames: (fs, s) => batches.push(fs.length, s.position?.seq ?? 0) });
    let changes = 0;
    live.subscribe(() => changes++);
    const last = msg({ id: "s", seq: 10001, status: "streaming", parts: [], content: "", updatedSeq: 10001 });
    f.push(snapshot(10001, [last]));
    for (let i = 0; i < 300; i++) f.push({ type: "event", event: ev(10002 + i, "chunk", { messageId: "s", content: "x" }) });
    await tick();
    expect(changes).toBe(0);
    frames.run();
    expect(live.getSnapshot().state.messages[0]!.content).toBe("x".repeat(300));
    expect(changes).toBeLessThanOrEqual(2); // the fold, and the queue read it starts
    expect(batches).toEqual([301, 10301]); // told once, of every frame, with the state after them
    live.close();
  });

  it("reads older messages before the first one held, in spans that adapt, until the start", async () => {
    const f = fakeClient(all);
    const frames = manualFrames();
    const live = follow(f.client, "c", { schedule: frames.schedule });
    f.push(snapshot(10000, all.slice(-100)));
    await tick();
    frames.run();
    expect(live.getSnapshot().state.messages.length).toBe(100);
    expect(live.getSnapshot().older).toEqual({ loading: false, done: false });
    const reading = live.loadOlder();
    expect(live.getSnapshot().older.loading).toBe(true);
    await reading;
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
    const f = fakeClient(all);
    const frames = manualFrames();
    const live = follow(f.client, "c", { schedule: frames.schedule });
    f.push(snapshot(10000, all.slice(-10)));
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

  it("reads a summarized message whole when asked, once at a time, and not by itself when fetchMissing is false", async () => {
    const whole = msg({ id: "big", seq: 5, content: "all of it", parts: [{ type: "text", text: "all of it" }] });
    const f = fakeClient([whole]);
    const live = follow(f.client, "c", { fetchMissing: false });
    f.push(snapshot(5, [{ ...whole, content: "", parts: [], summarized: { bytes: 40 } }]));
    await until(() => live.getSnapshot().state.messages.length === 1, "the snapshot");
    await tick();
    expect(f.reads.filter((r) => r.startsWith("message "))).toEqual([]);
    await Promise.all([live.fetchMessage("big"), live.fetchMessage("big")]);
    expect(f.reads.filter((r) => r.startsWith("message "))).toEqual(["message big"]);
    expect(live.getSnapshot().state.messages[0]!.content).toBe("all of it");
    live.close();
  });

  it("says a snapshot with no messages has no older ones", async () => {
    const f = fakeClient([]);
    const live = follow(f.client, "c");
    f.push(snapshot(3, []));
    await until(() => live.getSnapshot().state.position !== null, "the snapshot");
    expect(live.getSnapshot().older).toEqual({ loading: false, done: true });
    await live.loadOlder();
    expect(f.reads).toEqual([]);
    live.close();
  });
});
