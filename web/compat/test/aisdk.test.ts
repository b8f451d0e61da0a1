// The Vercel AI SDK against Parley, as a useChat app uses it: the real
// `ai` package (the latest, and 5.0.0, whose chunk schema refuses any field
// it does not list) through DefaultChatTransport and readUIMessageStream.

import { readFileSync } from "node:fs";
import * as aiLatest from "ai";
import * as ai5 from "ai5";
import { describe, expect, test } from "vitest";
import { Runner, scriptedAnswer } from "./runner.js";
import { admin, newId, stored, storedParts, uiParts, url, you } from "./stored.js";

/** What the tests use of an `ai` package: the same in every version. */
interface UIMessage {
  id: string;
  role: string;
  parts: Record<string, unknown>[];
}
interface Transport {
  sendMessages(o: {
    chatId: string;
    messages: UIMessage[];
    abortSignal: AbortSignal | undefined;
    trigger: "submit-message" | "regenerate-message";
    messageId: string | undefined;
  }): Promise<ReadableStream<unknown>>;
  reconnectToStream(o: { chatId: string }): Promise<ReadableStream<unknown> | null>;
}
interface AI {
  DefaultChatTransport: new (o: { api: string; headers: Record<string, string>; body: Record<string, unknown> }) => Transport;
  readUIMessageStream(o: { stream: ReadableStream<never>; onError?: (e: unknown) => void }): AsyncIterable<UIMessage>;
}

/** The version of an installed package, from its package.json. */
const version = (dir: string): string =>
  (JSON.parse(readFileSync(new URL(`../node_modules/${dir}/package.json`, import.meta.url), "utf8")) as { version: string }).version;

const versions: [string, AI][] = [
  ["ai " + version("ai"), aiLatest],
  ["ai " + version("ai5"), ai5],
];

/** A transport to Parley for the user "you", asking the agent "helper". */
const transport = (ai: AI): Transport =>
  new ai.DefaultChatTransport({ api: url() + "/v1/chat", headers: { Authorization: "Bearer " + you() }, body: { to: "helper" } });

const question = (text: string): UIMessage[] => [{ id: newId("u"), role: "user", parts: [{ type: "text", text }] }];

/**
 * Folds a UI message stream with readUIMessageStream; the last message. An
 * `error` chunk fails it with the error the SDK made of it (its onError),
 * as useChat fails a request with one.
 */
async function fold(ai: AI, stream: ReadableStream<unknown>): Promise<UIMessage> {
  let last: UIMessage | undefined;
  let failed: Error | undefined;
  for await (const m of ai.readUIMessageStream({ stream: stream as ReadableStream<never>, onError: (e) => (failed ??= e as Error) })) last = m;
  if (failed) throw failed;
  if (!last) throw new Error("the stream held no message");
  return last;
}

/** Sends frames of the scripted answer, from..to. */
async function play(run: Runner, id: string, from: number, to?: number): Promise<void> {
  for (const f of scriptedAnswer(id).slice(from, to)) await run.send(f);
}

/**
 * Asks a new chat a question through DefaultChatTransport: the chat, the
 * runner that got the question, and the answer folding (a failure of which
 * is the test's to see, whenever it comes).
 */
async function ask(ai: AI, text: string): Promise<{ chat: string; run: Runner; folding: Promise<UIMessage>; promptId: string }> {
  const chat = newId("chat");
  const stream = await transport(ai).sendMessages({ chatId: chat, messages: question(text), abortSignal: undefined, trigger: "submit-message", messageId: undefined });
  const run = await Runner.attach(url(), admin(), chat);
  const prompt = await run.next();
  expect(prompt["content"]).toBe(text);
  const folding = fold(ai, stream);
  folding.catch(() => undefined); // seen by the test's own await
  return { chat, run, folding, promptId: String(prompt["messageId"]) };
}

describe.each(versions)("%s", (_name, ai) => {
  test("a message sent folds to exactly the stored answer, its tool part output-available", async () => {
    const chat = newId("chat");
    const t = transport(ai);
    const stream = await t.sendMessages({ chatId: chat, messages: question("What is 6 x 7?"), abortSignal: undefined, trigger: "submit-message", messageId: undefined });
    const run = await Runner.attach(url(), admin(), chat);
    expect((await run.next())["content"]).toBe("What is 6 x 7?");
    const folding = fold(ai, stream);
    await play(run, "r1", 0);
    const m = await folding;
    const s = await stored(chat, "r1");
    expect(m.id).toBe("r1");
    expect(uiParts(m)).toEqual(storedParts(s));
    expect(uiParts(m)).toContainEqual({ tool: "search", callId: "c1", state: "output-available", input: { q: "6 x 7", n: 1 }, output: { hits: ["42"] } });
    expect(s.content).toBe("Let me look that up. It is 42 — «forty-two».");
    run.close();
  });

  test("an answer cut after a few chunks and resumed with reconnectToStream folds to exactly the stored answer", async () => {
    const chat = newId("chat");
    const t = transport(ai);
    const abort = new AbortController();
    const asked = question("Cut me off");
    const stream = await t.sendMessages({ chatId: chat, messages: asked, abortSignal: abort.signal, trigger: "submit-message", messageId: undefined });
    const run = await Runner.attach(url(), admin(), chat);
    await run.next();
    await play(run, "r1", 0, 4); // text, then the search running
    const reader = stream.getReader();
    const before: unknown[] = [];
    const statuses: unknown[] = [];
    while (before.length < 4) {
      // Asked before any runner was attached: transient status parts say so first.
      const v = (await reader.read()).value as { type?: string };
      (v.type === "data-parley-status" ? statuses : before).push(v);
    }
    const promptId = asked[0]!.id;
    expect(statuses).toEqual([
      { type: "data-parley-status", data: { promptId, state: "queued", waitingOn: { reason: "runner", agentId: "helper" } }, transient: true },
      { type: "data-parley-status", data: { promptId, state: "dispatched", runner: "helper" }, transient: true },
    ]);
    expect(before).toEqual([
      { type: "start", messageId: "r1" },
      { type: "text-start", id: "t0" },
      { type: "text-delta", id: "t0", delta: "Let me " },
      { type: "text-delta", id: "t0", delta: "look that up. " },
    ]);
    abort.abort(); // the page goes away mid-answer
    await reader.cancel().catch(() => undefined);
    const resumed = await t.reconnectToStream({ chatId: chat });
    expect(resumed).not.toBeNull();
    const folding = fold(ai, resumed!);
    await play(run, "r1", 4); // the rest, live
    const m = await folding;
    expect(m.id).toBe("r1");
    expect(uiParts(m)).toEqual(storedParts(await stored(chat, "r1")));
    run.close();
  });

  test("reconnecting with nothing streaming gives no stream", async () => {
    const chat = newId("chat");
    const t = transport(ai);
    const stream = await t.sendMessages({ chatId: chat, messages: question("Quick one"), abortSignal: undefined, trigger: "submit-message", messageId: undefined });
    const run = await Runner.attach(url(), admin(), chat);
    await run.next();
    const folding = fold(ai, stream);
    await play(run, "r1", 0);
    await folding;
    expect(await t.reconnectToStream({ chatId: chat })).toBeNull();
    run.close();
  });

  test("an answer stopped (abort) folds to the stored canceled answer", async () => {
    const { chat, run, folding, promptId } = await ask(ai, "Stop me");
    await play(run, "r1", 0, 4); // text, then the search running
    // The stop names the question it means: its answer is the one stopped.
    const stop = await fetch(`${url()}/v1/conversations/${chat}/abort`, {
      method: "POST",
      headers: { Authorization: "Bearer " + you(), "Content-Type": "application/json" },
      body: JSON.stringify({ promptId }),
    });
    expect(stop.status).toBe(202);
    expect(await stop.json()).toEqual({ status: "aborting", promptId, messageId: "r1" });
    expect((await run.next())["type"]).toBe("abort");
    await run.send({ type: "aborted" });
    const m = await folding;
    const s = await stored(chat, "r1");
    expect(s.status).toBe("canceled");
    expect(m.id).toBe("r1");
    expect(uiParts(m)).toEqual(storedParts(s));
    expect(uiParts(m)).toContainEqual(expect.objectContaining({ tool: "search", state: "output-error" })); // it was running
    run.close();
  });

  test("an answer that ends in an error surfaces as the SDK's error", async () => {
    const { chat, run, folding } = await ask(ai, "Fail");
    await play(run, "r1", 0, 2);
    await run.send({ type: "error", turnId: "r1", error: "the model is down" });
    await run.send({ type: "complete" }); // no retry: the answer ended with that error
    await expect(folding).rejects.toThrow("the model is down");
    expect((await stored(chat, "r1")).status).toBe("error");
    run.close();
  });

  test("a tool call that fails gives the tool part output-error", async () => {
    const { chat, run, folding } = await ask(ai, "Search");
    for (const f of [
      { type: "message.create", turnId: "r1" },
      { type: "message.part.tool-update", turnId: "r1", callId: "c1", toolName: "search", status: "running", args: { q: "6 x 7" } },
      { type: "message.part.tool-update", turnId: "r1", callId: "c1", toolName: "search", status: "error", error: "the index is offline" },
      { type: "message.part.text-delta", turnId: "r1", delta: "The search failed." },
      { type: "message.finalize", turnId: "r1", reason: "end_turn" },
      { type: "complete" },
    ]) {
      await run.send(f);
    }
    const m = await folding;
    expect(uiParts(m)).toEqual(storedParts(await stored(chat, "r1")));
    expect(uiParts(m)[0]).toEqual({ tool: "search", callId: "c1", state: "output-error", input: { q: "6 x 7" }, output: "the index is offline" });
    run.close();
  });

  test("regenerate-message reverts the last answer and asks again, folding to the new stored answer", async () => {
    const chat = newId("chat");
    const t = transport(ai);
    const q = question("What is 6 x 7?");
    const first = await t.sendMessages({ chatId: chat, messages: q, abortSignal: undefined, trigger: "submit-message", messageId: undefined });
    const run = await Runner.attach(url(), admin(), chat);
    await run.next();
    const folding = fold(ai, first);
    await play(run, "r1", 0);
    const answer = await folding;
    // What useChat's regenerate sends: the messages up to the question, and the answer asked again.
    const again = await t.sendMessages({ chatId: chat, messages: q, abortSignal: undefined, trigger: "regenerate-message", messageId: answer.id });
    expect(await run.next()).toMatchObject({ type: "revert", messageId: q[0]!.id }); // the runner is told: from the question on
    // Asked again under an id of its own: the reverted question's id names it for good.
    const prompt = await run.next();
    expect(prompt).toMatchObject({ type: "prompt", content: "What is 6 x 7?" });
    expect(prompt.messageId).not.toBe(q[0]!.id);
    const refolding = fold(ai, again);
    await play(run, "r2", 0);
    const m = await refolding;
    expect(m.id).toBe("r2");
    expect(uiParts(m)).toEqual(storedParts(await stored(chat, "r2")));
    const r = await fetch(`${url()}/v1/conversations/${chat}/messages`, { headers: { Authorization: "Bearer " + admin() } });
    const ids = ((await r.json()) as { messages: { id: string }[] }).messages.map((x) => x.id);
    expect(ids).toEqual([prompt.messageId, "r2"]); // the first question and answer are gone, the question asked again
    run.close();
  });

  test("a failover streams on into the retry: one message, the failed attempt's parts then the retry's, no error", async () => {
    const { chat, run, folding } = await ask(ai, "What is 6 x 7?");
    await play(run, "r1", 0, 4); // text, then the search running
    await run.send({ type: "error", turnId: "r1", error: "the model's connection dropped", finality: "none" }); // keeps the prompt
    await run.send({ type: "message.create", turnId: "r2", retryOf: "r1" });
    await run.send({ type: "message.part.text-delta", turnId: "r2", delta: "It is 42." });
    await run.send({ type: "message.finalize", turnId: "r2", reason: "end_turn" });
    await run.send({ type: "complete" });
    const m = await folding; // no error on the way
    const [failed, retry] = [await stored(chat, "r1"), await stored(chat, "r2")];
    expect([failed.status, retry.status]).toEqual(["error", "complete"]);
    expect(m.id).toBe("r1");
    expect(uiParts(m)).toEqual([...storedParts(failed), ...storedParts(retry)]);
    expect(uiParts(m).at(-1)).toEqual({ text: "It is 42." });
    run.close();
  });
});
