// Input requests through the Vercel AI SDK, as a useChat page meets them:
// the SDK's own Chat (AbstractChat, which useChat wraps) of the latest `ai`
// and of 6.0.0, the first with tool approvals (its chunk schema refuses any
// field it does not list). An approval of a tool call is the SDK's tool
// approval: the stream pauses, the page answers with
// addToolApprovalResponse, and the next request goes on with the same
// answer. A question is a data part, answered over Parley's HTTP API while
// the stream waits (also with 5.0.0, which has no approvals).

import * as aiLatest from "ai";
import * as ai5 from "ai5";
import * as ai6 from "ai6";
import { describe, expect, test } from "vitest";
import { Runner } from "./runner.js";
import { admin, newId, stored, url, you } from "./stored.js";

/** What the tests use of an `ai` package's UI messages. */
interface UIMessage {
  id: string;
  role: string;
  parts: Record<string, unknown>[];
}
/** What the tests use of a Chat: the same in every version with approvals. */
interface Chat {
  readonly messages: UIMessage[];
  readonly status: string;
  readonly error: Error | undefined;
  sendMessage(m?: { text: string }): Promise<void>;
  addToolApprovalResponse(o: { id: string; approved: boolean; reason?: string }): Promise<void>;
  resumeStream(): Promise<void>;
}
type Frame = Record<string, unknown>;

/** A chat's state, as a page keeps it: messages replaced, never mutated. */
class State {
  status = "ready";
  error: Error | undefined = undefined;
  messages: UIMessage[] = [];
  pushMessage = (m: UIMessage): void => void (this.messages = [...this.messages, m]);
  popMessage = (): void => void (this.messages = this.messages.slice(0, -1));
  replaceMessage = (i: number, m: UIMessage): void => void (this.messages = this.messages.map((x, j) => (j === i ? m : x)));
  snapshot = <T>(t: T): T => structuredClone(t);
}

/** What the tests use of an `ai` package with approvals: its transport and its Chat. */
interface ChatAI {
  DefaultChatTransport: new (o: { api: string; headers: Record<string, string>; body: Record<string, unknown>; fetch: typeof fetch }) => unknown;
  AbstractChat: unknown;
  lastAssistantMessageIsCompleteWithApprovalResponses: unknown;
}
type ChatClass = abstract new (o: { id: string; transport: unknown; state: State; sendAutomaticallyWhen?: unknown; onFinish: () => void }) => Chat;

/** Resolves each chat's requests as they finish, in order. */
const finishes = new WeakMap<Chat, { done: number; waiting: Map<number, () => void> }>();

/** Resolved once the chat's n-th request (from 1) has finished. */
function finished(chat: Chat, n: number): Promise<void> {
  const f = finishes.get(chat)!;
  return f.done >= n ? Promise.resolve() : new Promise((r) => f.waiting.set(n, r));
}

/**
 * Resolved once the chat's first request has its response: its
 * conversation exists then, and a runner can attach to it.
 */
const answered = new WeakMap<Chat, Promise<void>>();

/** A Chat of chat id, as a page makes it (useChat does the same with a React state). */
const chatOf =
  (ai: ChatAI, auto = false) =>
  (id: string, messages: UIMessage[] = []): Chat => {
    const state = new State();
    state.messages = messages;
    let responded = (): void => undefined;
    const first = new Promise<void>((r) => (responded = r));
    const observed: typeof fetch = async (input, init) => {
      const r = await fetch(input, init);
      responded();
      return r;
    };
    const transport = new ai.DefaultChatTransport({ api: url() + "/v1/chat", headers: { Authorization: "Bearer " + you() }, body: { to: "helper" }, fetch: observed });
    const Base = ai.AbstractChat as ChatClass;
    const PageChat = class extends Base {};
    const done = { done: 0, waiting: new Map<number, () => void>() };
    const onFinish = (): void => {
      done.done++;
      done.waiting.get(done.done)?.();
    };
    const sendAutomaticallyWhen = auto ? ai.lastAssistantMessageIsCompleteWithApprovalResponses : undefined;
    const chat = new PageChat({ id, transport, state, sendAutomaticallyWhen, onFinish });
    answered.set(chat, first);
    finishes.set(chat, done);
    return chat;
  };

/**
 * Each version: its Chat, and one that sends an approval's answer by
 * itself (sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses),
 * where that helper counts the runner's calls (6.0.0's leaves out
 * provider-executed calls: its page calls sendMessage itself).
 */
const withApprovals: [string, (id: string, messages?: UIMessage[]) => Chat, ((id: string) => Chat) | undefined][] = [
  ["ai latest", chatOf(aiLatest), chatOf(aiLatest, true)],
  ["ai 6.0.0", chatOf(ai6), undefined],
];

/** The runner's answer up to its approval: text, the call, the approval of it. */
function untilApproval(id: string, req: string): Frame[] {
  return [
    { type: "message.create", turnId: id },
    { type: "message.part.text-delta", turnId: id, delta: "I will clean the build. " },
    { type: "message.part.tool-update", turnId: id, callId: "c1", toolName: "bash", status: "pending", args: { command: "rm -rf build" } },
    { type: "message.part.input-request", turnId: id, requestId: req, kind: "approval", toolCallId: "c1", toolName: "bash", args: { command: "rm -rf build" }, title: "Run `rm -rf build`?" },
  ];
}

/** A chat asked a question whose answer waits for an approval: the runner, and the request's id. */
async function askApproval(chat: Chat, id: string): Promise<{ run: Runner; req: string }> {
  const sending = chat.sendMessage({ text: "Clean the build" });
  await answered.get(chat); // the conversation is made
  const run = await Runner.attach(url(), admin(), id);
  expect((await run.next())["content"]).toBe("Clean the build");
  const req = newId("req");
  for (const f of untilApproval("r1", req)) await run.send(f);
  await sending; // the stream paused at the approval
  expect(chat.error).toBeUndefined();
  return { run, req };
}

/** The runner gets the outcome of request req, acknowledges it, and returns it. */
async function outcome(run: Runner, req: string): Promise<Frame> {
  const f = await run.next();
  expect(f).toMatchObject({ type: "input.answered", requestId: req });
  await run.send({ type: "input.ack", requestId: req });
  return f;
}

/** The tool part of a UI message, and its data-input-request parts. */
const toolPart = (m: UIMessage): Record<string, unknown> | undefined => m.parts.find((p) => p["type"] === "tool-bash");
const requestParts = (m: UIMessage): Record<string, unknown>[] => m.parts.filter((p) => p["type"] === "data-input-request");

describe.each(withApprovals)("%s", (_name, newChat, newAutoChat) => {
  test("an approval pauses the stream; approving it goes on with the same answer, which folds to the stored one", async () => {
    const id = newId("chat");
    const chat = newChat(id);
    const { run, req } = await askApproval(chat, id);
    const paused = chat.messages.at(-1)!;
    expect(paused.id).toBe("r1");
    expect(toolPart(paused)).toMatchObject({ state: "approval-requested", toolCallId: "c1", input: { command: "rm -rf build" }, approval: { id: req } });
    expect(requestParts(paused)).toHaveLength(1);
    expect(requestParts(paused)[0]).toMatchObject({ id: req, data: { kind: "approval", status: "pending", title: "Run `rm -rf build`?" } });
    expect((await stored(id, "r1")).status).toBe("streaming"); // the message stays open

    await chat.addToolApprovalResponse({ id: req, approved: true });
    const going = chat.sendMessage(); // what sendAutomaticallyWhen would do
    expect((await outcome(run, req))["answer"]).toEqual({ approved: true });
    for (const f of [
      { type: "message.part.tool-update", turnId: "r1", callId: "c1", status: "completed", result: "removed" },
      { type: "message.part.text-delta", turnId: "r1", delta: "Done." },
      { type: "message.finalize", turnId: "r1", reason: "end_turn" },
      { type: "complete" },
    ]) {
      await run.send(f);
    }
    await going;
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.role)).toEqual(["user", "assistant"]); // one answer
    const m = chat.messages[1]!;
    expect(m.id).toBe("r1");
    expect(toolPart(m)).toMatchObject({ state: "output-available", output: "removed" });
    expect(requestParts(m)).toHaveLength(1);
    expect(requestParts(m)[0]).toMatchObject({ id: req, data: { status: "answered", answer: { approved: true }, answeredBy: "you" } });
    const s = await stored(id, "r1");
    expect(s.status).toBe("complete");
    const text = m.parts.filter((p) => p["type"] === "text").map((p) => p["text"] as string);
    expect(text.join("")).toBe(s.content);
    run.close();
  });

  test("denying an approval (sent by sendAutomaticallyWhen where it can) gives the tool part output-denied, and the runner the denial", async () => {
    const id = newId("chat");
    const chat = (newAutoChat ?? newChat)(id);
    const { run, req } = await askApproval(chat, id);
    await chat.addToolApprovalResponse({ id: req, approved: false, reason: "not now" }); // sends by itself, with newAutoChat
    const going = newAutoChat ? finished(chat, 2) : chat.sendMessage();
    expect((await outcome(run, req))["answer"]).toEqual({ approved: false, reason: "not now" });
    for (const f of [
      { type: "message.part.tool-update", turnId: "r1", callId: "c1", status: "error", error: "denied" },
      { type: "message.part.text-delta", turnId: "r1", delta: "I left it." },
      { type: "message.finalize", turnId: "r1", reason: "end_turn" },
      { type: "complete" },
    ]) {
      await run.send(f);
    }
    await going;
    expect(chat.error).toBeUndefined();
    const m = chat.messages.at(-1)!;
    expect(toolPart(m)).toMatchObject({ state: "output-denied" });
    expect(m.parts.at(-1)).toMatchObject({ type: "text", text: "I left it." });
    run.close();
  });

  test("a page reloaded while an approval is pending resumes it exactly once, and approves it", async () => {
    const id = newId("chat");
    const first = newChat(id);
    const { run, req } = await askApproval(first, id);
    // The page reloads: it has the question (the stored messages, the answer still streaming left out) and resumes.
    const chat = newChat(id, [first.messages[0]!]);
    await chat.resumeStream();
    expect(chat.error).toBeUndefined();
    expect(chat.messages.map((m) => m.id)).toEqual([first.messages[0]!.id, "r1"]);
    const m = chat.messages[1]!;
    const tools = m.parts.filter((p) => p["type"] === "tool-bash");
    expect(tools).toHaveLength(1);
    expect(tools[0]).toMatchObject({ state: "approval-requested", approval: { id: req } });
    expect(requestParts(m)).toHaveLength(1);
    expect(m.parts.filter((p) => p["type"] === "text").map((p) => p["text"])).toEqual(["I will clean the build. "]);

    await chat.addToolApprovalResponse({ id: req, approved: true });
    const going = chat.sendMessage();
    await outcome(run, req);
    for (const f of [
      { type: "message.part.tool-update", turnId: "r1", callId: "c1", status: "completed", result: "removed" },
      { type: "message.finalize", turnId: "r1", reason: "end_turn" },
      { type: "complete" },
    ]) {
      await run.send(f);
    }
    await going;
    expect(chat.messages.map((x) => x.id)).toEqual([first.messages[0]!.id, "r1"]);
    expect(toolPart(chat.messages[1]!)).toMatchObject({ state: "output-available", output: "removed" });
    run.close();
  });
});

/** What the question test uses of an `ai` package. */
interface AI {
  DefaultChatTransport: new (o: { api: string; headers: Record<string, string>; body: Record<string, unknown> }) => {
    sendMessages(o: { chatId: string; messages: UIMessage[]; abortSignal: undefined; trigger: "submit-message"; messageId: undefined }): Promise<ReadableStream<unknown>>;
  };
  readUIMessageStream(o: { stream: ReadableStream<never>; onError?: (e: unknown) => void }): AsyncIterable<UIMessage>;
}

describe.each([
  ["ai latest", aiLatest as unknown as AI],
  ["ai 6.0.0", ai6 as unknown as AI],
  ["ai 5.0.0", ai5 as unknown as AI],
])("%s", (_name, ai) => {
  test("a question is a data part the stream waits on; answered over the HTTP API, the answer goes on", async () => {
    const id = newId("chat");
    const t = new ai.DefaultChatTransport({ api: url() + "/v1/chat", headers: { Authorization: "Bearer " + you() }, body: { to: "helper" } });
    const stream = await t.sendMessages({ chatId: id, messages: [{ id: newId("u"), role: "user", parts: [{ type: "text", text: "Paint it" }] }], abortSignal: undefined, trigger: "submit-message", messageId: undefined });
    const run = await Runner.attach(url(), admin(), id);
    await run.next();
    const req = newId("req");
    let last: UIMessage | undefined;
    let failed: unknown;
    const seen = (async () => {
      for await (const m of ai.readUIMessageStream({ stream: stream as ReadableStream<never>, onError: (e) => (failed ??= e) })) last = m;
    })();
    await run.send({ type: "message.create", turnId: "r1" });
    await run.send({ type: "message.part.input-request", turnId: "r1", requestId: req, kind: "question", title: "Which colour?", options: [{ label: "Blue" }, { label: "Red" }] });
    const answered = await fetch(`${url()}/v1/conversations/${id}/inputs/${req}`, {
      method: "POST",
      headers: { Authorization: "Bearer " + you(), "Content-Type": "application/json" },
      body: JSON.stringify({ answer: { choices: ["Blue"] } }),
    });
    expect(answered.status).toBe(200);
    expect((await outcome(run, req))["answer"]).toEqual({ choices: ["Blue"] });
    await run.send({ type: "message.part.text-delta", turnId: "r1", delta: "Blue it is." });
    await run.send({ type: "message.finalize", turnId: "r1", reason: "end_turn" });
    await run.send({ type: "complete" });
    await seen;
    expect(failed).toBeUndefined();
    expect(last!.id).toBe("r1");
    expect(requestParts(last!)).toHaveLength(1);
    expect(requestParts(last!)[0]).toMatchObject({ id: req, data: { kind: "question", title: "Which colour?", status: "answered", answer: { choices: ["Blue"] } } });
    expect(last!.parts.at(-1)).toMatchObject({ type: "text", text: "Blue it is." });
    run.close();
  });
});
