// Runners that answer prompts (Runner.serve), against the real server: a
// conversation's own and an agent's for every conversation, side by side,
// stopped, deleted under an answer, cut off mid-answer, and refused.

import { describe, expect, inject, it } from "vitest";
import { ParleyClient, ParleyError, agentRunner, conversationRunner, type Message, type Reply } from "../src/index.js";
import { NodeWebSocket, Proxy, until } from "./helpers.js";
import { startServer } from "./server.js";

function client(baseUrl = inject("serverUrl"), token?: string): ParleyClient {
  return new ParleyClient({ baseUrl, token, WebSocket: NodeWebSocket });
}

/** A conversation in which `agent` answers and human asks. */
async function chat(c: ParleyClient, agent: string): Promise<string> {
  return (await c.createConversation({ participants: [agent], members: ["human"] })).conversation.id;
}

/** How prompt `id` ended: "completed", "canceled: <reason>", or "" while it has not. */
async function ended(c: ParleyClient, conv: string, id: string): Promise<string> {
  const { events } = await c.events(conv, { after: 0, limit: 1000 });
  for (const e of events) {
    const d = e.data as { id?: string; reason?: string };
    if (d.id !== id) continue;
    if (e.type === "prompt.completed") return "completed";
    if (e.type === "prompt.canceled") return "canceled: " + (d.reason ?? "");
  }
  return "";
}

async function waitEnded(c: ParleyClient, conv: string, id: string): Promise<string> {
  let how = "";
  await until(async () => (how = await ended(c, conv, id)) !== "", `prompt ${id} to end`);
  return how;
}

/** The agent's messages that reply to prompt id. */
async function answers(c: ParleyClient, conv: string, agent: string, id: string): Promise<Message[]> {
  return (await c.messages(conv, { agentId: agent })).messages.filter((m) => m.replyTo === id);
}

/** Answers "block" by writing "partial" and waiting for its abort; anything else with an echo and a tool call. */
function blocking(started: string[]) {
  return async (reply: Reply, signal: AbortSignal): Promise<void> => {
    if (reply.prompt.content !== "block") {
      await reply.text("echo: ");
      await reply.tool({ callId: "c1", toolName: "repeat", status: "completed", result: { ok: true } });
      await reply.text(reply.prompt.content ?? "");
      return;
    }
    await reply.text("partial");
    started.push(reply.prompt.messageId);
    await new Promise<void>((r) => signal.addEventListener("abort", () => r(), { once: true }));
    await expect(reply.text(" more")).rejects.toThrow();
  };
}

describe("runners", () => {
  it("answer every conversation of an agent on one connection, side by side, one prompt at a time in each", async () => {
    const c = client();
    const agent = `helper-${Date.now()}`;
    const [a, b] = [await chat(c, agent), await chat(c, agent)];
    const started: string[] = [];
    const seen = new Map<string, string | undefined>();
    const handler = blocking(started);
    const runner = agentRunner(c, agent);
    const serving = runner.serve((reply, signal) => {
      seen.set(reply.prompt.messageId, reply.prompt.conversationId);
      return handler(reply, signal);
    });

    await c.prompt(a, { id: "a1", agentId: "human", content: "block" });
    await until(() => started.includes("a1"), "a1 to start");
    await c.prompt(a, { id: "a2", agentId: "human", content: "second in a" });
    await c.prompt(b, { id: "b1", agentId: "human", content: "first in b" });
    expect(await waitEnded(c, b, "b1")).toBe("completed"); // while a1 is under way
    const [b1] = await answers(c, b, agent, "b1");
    expect(b1).toMatchObject({ content: "echo: first in b", status: "complete" });
    expect(b1!.parts.map((p) => p.type)).toEqual(["text", "tool-call", "text", "finish"]);
    expect(await answers(c, a, agent, "a2")).toEqual([]);

    await c.stop(a);
    expect(await waitEnded(c, a, "a1")).toBe("canceled: aborted");
    expect(await waitEnded(c, a, "a2")).toBe("completed");
    expect(await answers(c, a, agent, "a1")).toMatchObject([{ content: "partial", status: "canceled" }]);
    expect(await answers(c, a, agent, "a2")).toMatchObject([{ content: "echo: second in a", status: "complete" }]);

    // b is deleted under an answer; the runner goes on in a.
    await c.prompt(b, { id: "b2", agentId: "human", content: "block" });
    await until(() => started.includes("b2"), "b2 to start");
    await c.deleteConversation(b);
    await c.prompt(a, { id: "a3", agentId: "human", content: "after the delete" });
    expect(await waitEnded(c, a, "a3")).toBe("completed");
    expect(Object.fromEntries(seen)).toEqual({ a1: a, a2: a, a3: a, b1: b, b2: b });

    runner.close();
    await serving;
  });

  it("answer a conversation's prompts on its own runner", async () => {
    const c = client();
    const id = await chat(c, "bot");
    const ctl = new AbortController();
    const serving = conversationRunner(c, id, { agentId: "bot" }).serve(blocking([]), { signal: ctl.signal });
    await c.prompt(id, { id: "p1", agentId: "human", content: "hello" });
    expect(await waitEnded(c, id, "p1")).toBe("completed");
    const [m] = await answers(c, id, "bot", "p1");
    expect(m).toMatchObject({ content: "echo: hello", status: "complete", replyTo: "p1", turnId: "p1" });
    ctl.abort();
    await serving;
  });

  it("go on in the same messages after the connection is cut mid-answer", async () => {
    const proxy = await Proxy.start(inject("serverUrl"));
    try {
      const c = client();
      const agent = `cut-${Date.now()}`;
      const [a, b] = [await chat(c, agent), await chat(c, agent)];
      let release!: () => void;
      const goOn = new Promise<void>((r) => (release = r));
      const steps: string[] = [];
      const runner = agentRunner(client(proxy.url), agent, { minBackoffMs: 10, maxBackoffMs: 50 });
      const serving = runner.serve(async (reply) => {
        await reply.text("one ");
        steps.push(reply.prompt.messageId);
        await goOn;
        await reply.text("two ");
        await reply.text("three");
      });
      await c.prompt(a, { id: "pa", agentId: "human", content: "go" });
      await c.prompt(b, { id: "pb", agentId: "human", content: "go" });
      await until(() => steps.length === 2, "both answers under way");
      proxy.cut();
      release();
      for (const [conv, p] of [[a, "pa"], [b, "pb"]] as const) {
        expect(await waitEnded(c, conv, p)).toBe("completed");
        expect(await answers(c, conv, agent, p)).toMatchObject([{ content: "one two three", status: "complete" }]);
      }
      expect(proxy.accepted).toBeGreaterThan(1);
      runner.close();
      await serving;
    } finally {
      await proxy.close();
    }
  });

  it("a conversation's runner stops at once with the server's refusal: a viewer, an admin naming no agent, an outsider", async () => {
    const server = await startServer(inject("parleyBinary"));
    try {
      const admin = await client(server.url).createToken({ kind: "admin" });
      const viewer = await client(server.url, admin.token).createToken({ kind: "viewer" });
      const carol = await client(server.url, admin.token).createToken({ kind: "agent", agentId: "carol" });
      const conv = await client(server.url, admin.token).createConversation({ participants: ["alice"] });
      const id = conv.conversation.id;
      // Each would be tried again for ever, in silence, if the refusal
      // were taken for a lost connection.
      const refusal = (c: ParleyClient, opts: { agentId?: string } = {}): Promise<unknown> =>
        conversationRunner(c, id, { ...opts, minBackoffMs: 10, maxBackoffMs: 10 })
          .serve(async () => {})
          .catch((e: unknown) => e);
      expect(await refusal(client(server.url, viewer.token))).toMatchObject({ status: 403, code: "forbidden" });
      expect(await refusal(client(server.url, admin.token))).toMatchObject({ status: 422, code: "invalid_value" });
      expect(await refusal(client(server.url, carol.token))).toMatchObject({ status: 403, code: "forbidden" });
      expect(await refusal(client(server.url, carol.token), { agentId: "alice" })).toMatchObject({ status: 403, code: "forbidden" });
    } finally {
      await server.stop();
    }
  });

  it("stop with the server's refusal when the token may not run the agent", async () => {
    const server = await startServer(inject("parleyBinary"));
    try {
      const admin = await client(server.url).createToken({ kind: "admin" });
      const alice = await client(server.url, admin.token).createToken({ kind: "agent", agentId: "alice" });
      const err = await agentRunner(client(server.url, alice.token), "bob")
        .serve(async () => {})
        .catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ParleyError);
      expect(err).toMatchObject({ code: "forbidden" });
      const none = await agentRunner(client(server.url, "pk_nope"), "alice")
        .serve(async () => {})
        .catch((e: unknown) => e);
      expect(none).toMatchObject({ status: 401, code: "unauthorized" });
    } finally {
      await server.stop();
    }
  });
  it("end an answer whose turn is aborted under it canceled, with no error part", async () => {
    const c = client();
    const id = await chat(c, "bot");
    const ctl = new AbortController();
    let started = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const serving = conversationRunner(c, id, { agentId: "bot" }).serve(
      async (reply) => {
        await reply.text("partial");
        started = true;
        await gate;
        await reply.text(" more"); // refused: the turn was aborted (or the answer was)
      },
      { signal: ctl.signal },
    );
    await c.prompt(id, { id: "p1", agentId: "human", content: "go on" });
    await until(() => started, "p1 to start");
    await c.abortTurn(id, { agentId: "human", reason: "taking over" });
    release();
    expect(await waitEnded(c, id, "p1")).toMatch(/^canceled/);
    const [m] = await answers(c, id, "bot", "p1");
    expect(m).toMatchObject({ content: "partial", status: "canceled" });
    expect(m!.parts.map((p) => p.type)).not.toContain("error");
    ctl.abort();
    await serving;
  });
});
