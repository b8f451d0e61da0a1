// Input requests through AG-UI, with the real @ag-ui/client (its verifier
// always on): a run whose answer waits on an approval finishes with an
// interrupt outcome, and the next run answers it in RunAgentInput.resume
// and goes on with the same answer.

import { EventType, HttpAgent, verifyEvents, type BaseEvent, type Interrupt } from "@ag-ui/client";
import { from, lastValueFrom, toArray } from "rxjs";
import { expect, test } from "vitest";
import { Runner } from "./runner.js";
import { admin, newId, stored, url, you } from "./stored.js";

type Frame = Record<string, unknown>;

/**
 * A run of a new thread whose answer stops at an approval of a tool call:
 * the agent (its run finished, interrupted), the runner, the request's id
 * and the interrupted run's input.
 */
async function interrupted(): Promise<{ a: HttpAgent; run: Runner; req: string; thread: string; runId: string; question: string }> {
  const thread = newId("thread");
  const question = newId("m");
  const a = new HttpAgent({
    url: url() + "/v1/ag-ui",
    headers: { Authorization: "Bearer " + you() },
    threadId: thread,
    initialMessages: [{ id: question, role: "user", content: "Clean the build" }],
  });
  let started = (): void => undefined;
  const runStarted = new Promise<void>((r) => (started = r));
  const runId = newId("run");
  const running = a.runAgent({ runId, forwardedProps: { to: "helper" } }, { onRunStartedEvent: () => started() });
  await runStarted;
  const run = await Runner.attach(url(), admin(), thread);
  expect((await run.next())["content"]).toBe("Clean the build");
  const req = newId("req");
  for (const f of [
    { type: "message.create", turnId: "r1" },
    { type: "message.part.text-delta", turnId: "r1", delta: "I will clean the build. " },
    { type: "message.part.tool-update", turnId: "r1", callId: "c1", toolName: "bash", status: "pending", args: { command: "rm -rf build" } },
    { type: "message.part.input-request", turnId: "r1", requestId: req, kind: "approval", toolCallId: "c1", toolName: "bash", args: { command: "rm -rf build" }, title: "Run `rm -rf build`?" },
  ]) {
    await run.send(f);
  }
  await running;
  return { a, run, req, thread, runId, question };
}

/** The runner gets the outcome of request req, acknowledges it, and returns it. */
async function outcome(run: Runner, req: string): Promise<Frame> {
  const f = await run.next();
  expect(f).toMatchObject({ type: "input.answered", requestId: req });
  await run.send({ type: "input.ack", requestId: req });
  return f;
}

/** The interrupt the tests' approval is, as the run's outcome lists it. */
const approval = (req: string): Interrupt => ({
  id: req,
  reason: "tool_approval",
  message: "Run `rm -rf build`?",
  toolCallId: "c1",
  responseSchema: {
    type: "object",
    properties: { approved: { type: "boolean" }, reason: { type: "string", maxLength: 4096 } },
    required: ["approved"],
    additionalProperties: false,
  },
  metadata: { kind: "approval", toolName: "bash", args: { command: "rm -rf build" } },
});

test("a run that reaches an approval finishes interrupted; the next run resumes it approved and goes on with the same answer", async () => {
  const { a, run, req, thread } = await interrupted();
  expect(a.pendingInterrupts).toEqual([approval(req)]);
  expect((await stored(thread, "r1")).status).toBe("streaming"); // the answer stays open

  let finished: string | undefined;
  const resuming = a.runAgent(
    { runId: newId("run"), forwardedProps: { to: "helper" }, resume: [{ interruptId: req, status: "resolved", payload: { approved: true } }] },
    { onRunFinishedEvent: (e) => void (finished = e.outcome) },
  );
  expect((await outcome(run, req))["answer"]).toEqual({ approved: true });
  for (const f of [
    { type: "message.part.tool-update", turnId: "r1", callId: "c1", status: "completed", result: "removed" },
    { type: "message.part.text-delta", turnId: "r1", delta: "Done." },
    { type: "message.finalize", turnId: "r1", reason: "end_turn" },
    { type: "complete" },
  ]) {
    await run.send(f);
  }
  await resuming;
  expect(finished).toBe("success");
  expect(a.pendingInterrupts).toEqual([]);
  const answer = a.messages.filter((m) => m.id === "r1");
  expect(answer).toHaveLength(1); // one answer, continued
  expect(answer[0]).toMatchObject({ role: "assistant", content: (await stored(thread, "r1")).content });
  expect(a.messages.find((m) => m.role === "tool")).toMatchObject({ toolCallId: "c1", content: JSON.stringify("removed") });
  run.close();
});

test("a run resumed with the approval denied tells the runner, and the call's result is the denial", async () => {
  const { a, run, req } = await interrupted();
  const resuming = a.runAgent({
    runId: newId("run"),
    forwardedProps: { to: "helper" },
    resume: [{ interruptId: req, status: "resolved", payload: { approved: false, reason: "not now" } }],
  });
  expect((await outcome(run, req))["answer"]).toEqual({ approved: false, reason: "not now" });
  for (const f of [
    { type: "message.part.tool-update", turnId: "r1", callId: "c1", status: "error", error: "denied" },
    { type: "message.part.text-delta", turnId: "r1", delta: "I left it." },
    { type: "message.finalize", turnId: "r1", reason: "end_turn" },
    { type: "complete" },
  ]) {
    await run.send(f);
  }
  await resuming;
  expect(a.messages.filter((m) => m.role === "tool")).toEqual([expect.objectContaining({ toolCallId: "c1", content: JSON.stringify({ approved: false, reason: "not now" }) })]);
  run.close();
});

/** Posts a RunAgentInput; the run's events (without the status events), checked by the verifier. */
async function post(input: object): Promise<BaseEvent[]> {
  const r = await fetch(url() + "/v1/ag-ui", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + you() },
    body: JSON.stringify(input),
  });
  expect(r.status).toBe(200);
  const events = (await r.text())
    .split("\n\n")
    .flatMap((block) => block.split("\n").filter((l) => l.startsWith("data: ")))
    .map((l) => JSON.parse(l.slice(6)) as BaseEvent & { name?: string })
    .filter((e) => !(e.type === EventType.CUSTOM && e.name === "parley.status"));
  return lastValueFrom(from(events).pipe(verifyEvents(), toArray()));
}

test("the interrupted run posted again shows its interrupt once more; a resume sent twice answers once", async () => {
  const { run, req, thread, runId, question } = await interrupted();
  const input = { threadId: thread, runId, tools: [], context: [], forwardedProps: { to: "helper" }, messages: [{ id: question, role: "user", content: "Clean the build" }] };
  const again = await post(input); // a page reloaded: the same run, from its start
  expect(again.map((e) => e.type)).toEqual([
    "RUN_STARTED",
    "TEXT_MESSAGE_START",
    "TEXT_MESSAGE_CONTENT",
    "TEXT_MESSAGE_END",
    "TOOL_CALL_START",
    "TOOL_CALL_ARGS",
    "TOOL_CALL_END",
    "RUN_FINISHED",
  ]);
  expect(again.at(-1)).toEqual({ type: "RUN_FINISHED", threadId: thread, runId, outcome: { type: "interrupt", interrupts: [approval(req)] } });

  const resume = { ...input, runId: newId("run"), resume: [{ interruptId: req, status: "resolved", payload: { approved: true } }] };
  const first = post(resume);
  await outcome(run, req);
  for (const f of [
    { type: "message.part.tool-update", turnId: "r1", callId: "c1", status: "completed", result: "removed" },
    { type: "message.finalize", turnId: "r1", reason: "end_turn" },
    { type: "complete" },
  ]) {
    await run.send(f);
  }
  const resumed = await first;
  expect(resumed.map((e) => e.type)).toEqual(["RUN_STARTED", "TOOL_CALL_RESULT", "RUN_FINISHED"]);
  // Sent again (a retried request): nothing new is answered, and the run is the same.
  expect((await post(resume)).map((e) => e.type)).toEqual(resumed.map((e) => e.type));
  const parts = (await stored(thread, "r1")).parts as { type: string; requestId?: string; status?: string }[];
  expect(parts.filter((p) => p.type === "input-request").map((p) => [p.requestId, p.status])).toEqual([[req, "answered"]]);
  run.close();
});
