// Input requests against the real server: a runner asks with
// Reply.askApproval and Reply.askQuestion, a person answers over HTTP
// (answerInput), and the stream's fold shows the request open and then
// answered, in its message and in the head.

import { describe, expect, inject, it } from "vitest";
import { ConversationFold, InputNotAnsweredError, ParleyClient, conversationRunner, type InputRequestPart, type Reply } from "../src/index.js";
import { NodeWebSocket, until } from "./helpers.js";

function client(): ParleyClient {
  return new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
}

async function chat(c: ParleyClient, agent: string): Promise<string> {
  return (await c.createConversation({ participants: [agent], members: ["human"] })).conversation.id;
}

/** Folds the conversation's stream into a ConversationFold until stopped. */
function watch(c: ParleyClient, id: string): { fold: ConversationFold; stop: () => void } {
  const fold = new ConversationFold();
  const sub = c.subscribe(id);
  void (async () => {
    try {
      for await (const f of sub) fold.apply(f);
    } catch {
      // closed
    }
  })();
  return { fold, stop: () => sub.close() };
}

describe("input requests", () => {
  it("an approval and a question: asked by the runner, answered over HTTP, taken by the runner, folded by the stream", async () => {
    const c = client();
    const id = await chat(c, "ops");
    const w = watch(c, id);
    const got: unknown[] = [];
    const ctl = new AbortController();
    const serving = conversationRunner(c, id, { agentId: "ops" }).serve(
      async (reply: Reply) => {
        await reply.text("I will deploy. ");
        await reply.tool({ callId: "call_1", toolName: "deploy", status: "pending", args: { env: "prod" } });
        got.push(await reply.askApproval({ requestId: `appr-${id}`, toolCallId: "call_1", toolName: "deploy", args: { env: "prod" }, title: "Deploy to prod?" }));
        got.push(await reply.askQuestion({ requestId: `q-${id}`, title: "Which region?", options: [{ label: "eu" }, { label: "us", description: "Virginia" }] }));
        await reply.text("Done.");
      },
      { signal: ctl.signal },
    );
    await c.prompt(id, { agentId: "human", content: "ship it" });

    // The approval is pending: listed, in the head, and in its message, which waits.
    await until(async () => (await c.inputs(id)).length === 1, "the approval to be pending");
    const [pending] = await c.inputs(id);
    expect(pending).toMatchObject({ requestId: `appr-${id}`, kind: "approval", status: "pending", toolName: "deploy", args: { env: "prod" }, agentId: "ops", conversationId: id });
    expect((await c.conversation(id)).head.pendingInputs).toMatchObject([{ requestId: `appr-${id}`, kind: "approval", agentId: "ops", messageId: pending!.messageId }]);
    await until(() => w.fold.state.messages.some((m) => m.awaitingInput === true), "the fold to show the message waiting");
    const waiting = w.fold.state.messages.find((m) => m.id === pending!.messageId)!;
    expect(waiting.status).toBe("streaming");
    expect(waiting.parts.map((p) => p.type)).toEqual(["text", "tool-call", "input-request"]);

    const answered = await c.answerInput(id, `appr-${id}`, { approved: true, reason: "go" }, { agentId: "human" });
    expect(answered.input).toMatchObject({ status: "answered", answer: { approved: true, reason: "go" } });
    // The same answer again is the first result; another one is a conflict.
    expect((await c.answerInput(id, `appr-${id}`, { approved: true, reason: "go" }, { agentId: "human" })).seq).toBe(answered.seq);
    await expect(c.answerInput(id, `appr-${id}`, { approved: false }, { agentId: "human" })).rejects.toMatchObject({ status: 409, code: "input_ended" });

    await until(async () => (await c.inputs(id)).some((x) => x.requestId === `q-${id}`), "the question to be pending");
    await expect(c.answerInput(id, `q-${id}`, { choices: ["mars"] }, { agentId: "human" })).rejects.toMatchObject({ status: 422, code: "invalid_value" });
    await c.answerInput(id, `q-${id}`, { choices: ["us"] }, { agentId: "human" });

    await until(() => got.length === 2, "the runner to take both answers");
    expect(got).toEqual([{ approved: true, reason: "go" }, { choices: ["us"] }]);
    await until(() => w.fold.state.messages.some((m) => m.id === pending!.messageId && m.status === "complete"), "the answer to end");
    const done = w.fold.state.messages.find((m) => m.id === pending!.messageId)!;
    expect(done.awaitingInput).toBeUndefined();
    const reqs = done.parts.filter((p): p is InputRequestPart => p.type === "input-request");
    expect(reqs.map((p) => [p.requestId, p.status, p.answer])).toEqual([
      [`appr-${id}`, "answered", { approved: true, reason: "go" }],
      [`q-${id}`, "answered", { choices: ["us"] }],
    ]);
    expect(reqs[0]!.answeredAt).toBeTruthy();
    expect(reqs[0]!.answeredBy).toBe("human");
    expect(w.fold.state.head?.pendingInputs ?? []).toEqual([]);
    expect(await c.inputs(id)).toEqual([]);
    // The runner acknowledged both outcomes: none is left open.
    await until(async () => (await c.events(id, { limit: 1000 })).events.filter((e) => e.type === "input.acked").length === 2, "both acks");
    expect(await c.inputs(id, "open")).toEqual([]);
    w.stop();
    ctl.abort();
    await serving;
  });

  it("an approval nobody answers expires into a denial, and a question that expires rejects", async () => {
    const c = client();
    const id = await chat(c, "slow");
    const got: unknown[] = [];
    const ctl = new AbortController();
    const soon = () => new Date(Date.now() + 1500);
    const serving = conversationRunner(c, id, { agentId: "slow" }).serve(
      async (reply) => {
        got.push(await reply.askApproval({ title: "Remove everything?", toolName: "rm", args: { path: "/" }, expiresAt: soon() }));
        got.push(await reply.askQuestion({ title: "Why?", expiresAt: soon() }).catch((e: unknown) => e));
      },
      { signal: ctl.signal },
    );
    await c.prompt(id, { agentId: "human", content: "clean up" });
    await until(() => got.length === 2, "both requests to expire", 20_000);
    expect(got[0]).toEqual({ approved: false, reason: "expired" });
    expect(got[1]).toBeInstanceOf(InputNotAnsweredError);
    expect(got[1]).toMatchObject({ status: "expired" });
    const m = (await c.messages(id)).messages.find((x) => x.agentId === "slow")!;
    expect(m.parts.filter((p): p is InputRequestPart => p.type === "input-request").map((p) => p.status)).toEqual(["expired", "expired"]);
    ctl.abort();
    await serving;
  });

  it("a stop cancels the pending request, and the ask ends (a denial, or the answer's abort, whichever the runner hears first)", async () => {
    const c = client();
    const id = await chat(c, "stopme");
    let outcome: unknown;
    const ctl = new AbortController();
    const serving = conversationRunner(c, id, { agentId: "stopme" }).serve(
      async (reply, signal) => {
        outcome = await reply.askApproval({ requestId: `s-${id}`, title: "Deploy?", toolName: "deploy" }, { signal }).catch((e: unknown) => e);
      },
      { signal: ctl.signal },
    );
    await c.prompt(id, { agentId: "human", content: "go" });
    await until(async () => (await c.inputs(id)).length === 1, "the request to be pending");
    await c.stop(id);
    await until(() => outcome !== undefined, "the ask to end");
    if (!(outcome instanceof Error)) expect(outcome).toMatchObject({ approved: false });
    await until(async () => (await c.events(id, { limit: 1000 })).events.some((e) => e.type === "input.answered" && e.data.status === "canceled"), "the request to be canceled");
    ctl.abort();
    await serving;
  });

  it("a request withdrawn by its runner (answered some other way) ends canceled with the reason, and takes no answer after", async () => {
    const c = client();
    const id = await chat(c, "withdrawer");
    let outcome: unknown;
    const ctl = new AbortController();
    const serving = conversationRunner(c, id, { agentId: "withdrawer" }).serve(
      async (reply, signal) => {
        const asked = reply.askApproval({ requestId: `w-${id}`, title: "Deploy?", toolName: "deploy" }, { signal });
        await until(async () => (await c.inputs(id)).length === 1, "the request to be pending");
        await reply.withdrawInput(`w-${id}`, "approved on the phone");
        outcome = await asked;
      },
      { signal: ctl.signal },
    );
    await c.prompt(id, { agentId: "human", content: "go" });
    await until(() => outcome !== undefined, "the ask to end");
    expect(outcome).toEqual({ approved: false, reason: "approved on the phone" });
    await expect(c.answerInput(id, `w-${id}`, { approved: true }, { agentId: "human" })).rejects.toMatchObject({ code: "input_ended" });
    ctl.abort();
    await serving;
  });

  it("a runner that restarted while its request was pending asks it again by its id and gets the answer, without asking twice", async () => {
    const c = client();
    const id = await chat(c, "phoenix");
    const rid = `again-${id}`;
    let asked = 0;
    const first = new AbortController();
    const serving1 = conversationRunner(c, id, { agentId: "phoenix" }).serve(
      async (reply, signal) => {
        asked++;
        await reply.askApproval({ requestId: rid, title: "Restart the world?" }, { signal }).catch(() => undefined);
      },
      { signal: first.signal },
    );
    await c.prompt(id, { agentId: "human", content: "restart" });
    await until(async () => (await c.inputs(id)).length === 1, "the request to be pending");
    first.abort(); // the runner goes away while it waits
    await serving1;

    let got: unknown;
    const second = new AbortController();
    const serving2 = conversationRunner(c, id, { agentId: "phoenix" }).serve(
      async (reply) => {
        asked++;
        got = await reply.askApproval({ requestId: rid, title: "Restart the world?" });
      },
      { signal: second.signal },
    );
    await until(() => asked === 2, "the prompt to come to the new runner");
    await c.answerInput(id, rid, { approved: true }, { agentId: "human" });
    await until(() => got !== undefined, "the new runner to take the answer");
    expect(got).toEqual({ approved: true });
    const { events } = await c.events(id, { limit: 1000 });
    expect(events.filter((e) => e.type === "part.updated" && (e.data.part as InputRequestPart).requestId === rid)).toHaveLength(1);
    second.abort();
    await serving2;
  });
});
