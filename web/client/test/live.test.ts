// follow(): the stream folded, with what it leaves out read over HTTP,
// against the real server.

import { expect, inject, it } from "vitest";
import { ParleyClient, follow, type LiveSnapshot } from "../src/index.js";
import { canonical } from "./fixtures.js";
import { NodeWebSocket, Runner, conversation, until } from "./helpers.js";

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
