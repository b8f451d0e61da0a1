// AG-UI against Parley: the real @ag-ui/client's HttpAgent (its verifier
// is always on), and a stream cut and resumed with Last-Event-ID, checked
// by the same verifier.

import { EventType, HttpAgent, verifyEvents, type BaseEvent } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";
import { expect, test } from "vitest";
import { Runner, scriptedAnswer } from "./runner.js";
import { admin, newId, stored, url, you } from "./stored.js";

const agent = (thread: string, text: string): HttpAgent =>
  new HttpAgent({
    url: url() + "/v1/ag-ui",
    headers: { Authorization: "Bearer " + you() },
    threadId: thread,
    initialMessages: [{ id: newId("m"), role: "user", content: text }],
  });

test("HttpAgent runs with its verifier and gets the stored text and tool call", async () => {
  const thread = newId("thread");
  const a = agent(thread, "What is 6 x 7?");
  // The run makes the thread; the runner attaches once the run started.
  let started = (): void => undefined;
  const runStarted = new Promise<void>((r) => (started = r));
  const running = a.runAgent({ runId: newId("run"), forwardedProps: { to: "helper" } }, { onRunStartedEvent: () => started() });
  await runStarted;
  const run = await Runner.attach(url(), admin(), thread);
  expect((await run.next())["content"]).toBe("What is 6 x 7?");
  for (const f of scriptedAnswer("r1")) await run.send(f);
  const { newMessages } = await running;
  const s = await stored(thread, "r1");
  const answer = newMessages.find((m) => m.id === "r1");
  expect(answer).toMatchObject({ role: "assistant", content: s.content });
  expect(answer && "toolCalls" in answer ? answer.toolCalls : undefined).toEqual([
    { id: "c1", type: "function", function: { name: "search", arguments: JSON.stringify({ q: "6 x 7", n: 1 }) } },
  ]);
  expect(newMessages.find((m) => m.role === "tool")).toMatchObject({ toolCallId: "c1", content: JSON.stringify({ hits: ["42"] }) });
  run.close();
});

/** Reads an AG-UI event stream: each event's id and the event. */
/**
 * The run's events, up to stopAfter of them, without the prompt status
 * events (CUSTOM parley.status: not part of the answer, with no id), which
 * go to statuses when given.
 */
async function readEvents(body: ReadableStream<Uint8Array>, stopAfter = Infinity, statuses?: BaseEvent[]): Promise<{ id: string; event: BaseEvent }[]> {
  const out: { id: string; event: BaseEvent }[] = [];
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buf = "";
  while (out.length < stopAfter) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += decoder.decode(value, { stream: true });
    for (let i = buf.indexOf("\n\n"); i >= 0 && out.length < stopAfter; i = buf.indexOf("\n\n")) {
      const lines = buf.slice(0, i).split("\n");
      buf = buf.slice(i + 2);
      const data = lines.find((l) => l.startsWith("data: "));
      if (!data) continue;
      const event = JSON.parse(data.slice(6)) as BaseEvent & { name?: string };
      if (event.type === EventType.CUSTOM && event.name === "parley.status") {
        statuses?.push(event);
        continue;
      }
      out.push({ id: lines.find((l) => l.startsWith("id: "))?.slice(4) ?? "", event });
    }
  }
  await reader.cancel().catch(() => undefined);
  return out;
}

test("a run cut mid-answer and posted again with Last-Event-ID goes on exactly, as the verifier accepts", async () => {
  const thread = newId("thread");
  const input = {
    threadId: thread,
    runId: newId("run"),
    state: {},
    tools: [],
    context: [],
    forwardedProps: { to: "helper" },
    messages: [{ id: newId("m"), role: "user", content: "Cut me off" }],
  };
  const post = (lastEventId?: string) =>
    fetch(url() + "/v1/ag-ui", {
      method: "POST",
      headers: { "Content-Type": "application/json", Authorization: "Bearer " + you(), ...(lastEventId ? { "Last-Event-ID": lastEventId } : {}) },
      body: JSON.stringify(input),
    });
  const first = await post();
  const run = await Runner.attach(url(), admin(), thread);
  await run.next();
  const frames = scriptedAnswer("r1");
  for (const f of frames.slice(0, 4)) await run.send(f); // text, then the search running
  // RUN_STARTED, TEXT_MESSAGE_START, two CONTENTs, then the END and TOOL_CALL_START of one log event: cut between those two.
  const statuses: BaseEvent[] = [];
  const head = await readEvents(first.body!, 5, statuses);
  // Asked before any runner was attached: the run said it waited for one, then that one took it.
  expect(statuses.map((e) => (e as BaseEvent & { value: { state: string } }).value.state)).toEqual(["queued", "dispatched"]);
  expect(head.map((e) => e.event.type)).toEqual(["RUN_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END"]);
  expect(head[4]!.id.split(":")).toHaveLength(3); // one of several AG-UI events made of one log event
  const again = await post(head[4]!.id);
  for (const f of frames.slice(4)) await run.send(f);
  const rest = await readEvents(again.body!);
  const all = [...head, ...rest].map((e) => e.event);
  const verified = await lastValueFrom(from(all).pipe(verifyEvents(), toArray()));
  expect(verified.map((e) => e.type)).toEqual([
    "RUN_STARTED",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "TOOL_CALL_RESULT",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "RUN_FINISHED",
  ]);
  const text = all.flatMap((e) => (e.type === EventType.TEXT_MESSAGE_CONTENT ? [(e as BaseEvent & { delta: string }).delta] : [])).join("");
  expect(text).toBe((await stored(thread, "r1")).content);
  run.close();
});

test("a failover runs on into the retry, as the verifier accepts: the failed attempt's message, then the retry's", async () => {
  const thread = newId("thread");
  const a = agent(thread, "What is 6 x 7?");
  let started = (): void => undefined;
  const runStarted = new Promise<void>((r) => (started = r));
  let failed = "";
  const running = a.runAgent({ runId: newId("run"), forwardedProps: { to: "helper" } }, { onRunStartedEvent: () => started(), onRunErrorEvent: ({ event }) => void (failed = event.message) });
  await runStarted;
  const run = await Runner.attach(url(), admin(), thread);
  await run.next();
  for (const f of scriptedAnswer("r1").slice(0, 4)) await run.send(f); // text, then the search running
  await run.send({ type: "error", turnId: "r1", error: "the model's connection dropped", finality: "none" }); // keeps the prompt
  await run.send({ type: "message.create", turnId: "r2", retryOf: "r1" });
  await run.send({ type: "message.part.text-delta", turnId: "r2", delta: "It is 42." });
  await run.send({ type: "message.finalize", turnId: "r2", reason: "end_turn" });
  await run.send({ type: "complete" });
  const { newMessages } = await running;
  expect(failed).toBe("");
  expect(newMessages.find((m) => m.id === "r1")).toMatchObject({ role: "assistant", content: (await stored(thread, "r1")).content });
  expect(newMessages.find((m) => m.id === "r2")).toMatchObject({ role: "assistant", content: "It is 42." });
  run.close();
});
