// The fold of input requests: the part a `part.updated` opens, the end an
// `input.answered` writes, `awaitingInput`, and the head's pending list.
// Pure functions over plain data: no server here (inputs.live.test.ts runs
// them against one).

import { describe, expect, it } from "vitest";
import {
  applyEvent,
  applyEventToMessages,
  applyInputAnswered,
  applyInputRequest,
  applyPendingInput,
  emptyState,
  foldFrame,
  pendingRequests,
  type ConversationState,
  type EventType,
  type Head,
  type InputRequestPart,
  type Message,
  type ParleyEvent,
  type Part,
} from "../src/index.js";

function ev(seq: number, type: EventType, data: unknown, agentId = "bob"): ParleyEvent {
  return { conversationId: "c", seq, type, turn: 1, agentId, finality: "none", ts: null, data } as ParleyEvent;
}

function msg(id: string, seq: number, ...parts: Part[]): Message {
  return {
    id, conversationId: "c", seq, updatedSeq: seq, status: "streaming", parts, content: "", role: "assistant", agentId: "bob",
    turn: 1, turnId: "q", depth: 0, finality: "none", createdAt: null, updatedAt: null,
  };
}

const approval = (id: string, extra: Partial<InputRequestPart> = {}): InputRequestPart => ({
  type: "input-request", requestId: id, kind: "approval", toolCallId: "call_1", toolName: "deploy", args: { env: "prod" },
  title: "Deploy to prod?", status: "pending", ...extra,
});
const opened = (seq: number, m: string, p: InputRequestPart) => ev(seq, "part.updated", { messageId: m, part: p });
const answered = (seq: number, m: string, requestId: string, extra: Record<string, unknown> = {}) =>
  ev(seq, "input.answered", { messageId: m, requestId, status: "answered", answer: { approved: true }, answeredBy: "alice", answeredAt: "2026-12-05T12:00:00.000Z", ...extra }, "alice");

describe("input requests in messages", () => {
  it("a part.updated with an input request adds it, ends the streaming text, and sets awaitingInput", () => {
    const ms = [msg("m1", 1, { type: "text", text: "Let me deploy.", streaming: true })];
    const out = applyEventToMessages(ms, opened(2, "m1", approval("r1")));
    expect(out).not.toBe(ms);
    const m = out[0]!;
    expect(m.awaitingInput).toBe(true);
    expect(m.updatedSeq).toBe(2);
    expect(m.parts).toEqual([{ type: "text", text: "Let me deploy." }, approval("r1")]);
    expect(pendingRequests(m).map((p) => p.requestId)).toEqual(["r1"]);
    expect(ms[0]!.parts[0]).toEqual({ type: "text", text: "Let me deploy.", streaming: true }); // not changed in place
  });

  it("text after a request starts a new part, and a second request with its own id is added beside the first", () => {
    let ms = applyEventToMessages([msg("m1", 1)], opened(2, "m1", approval("r1")));
    ms = applyEventToMessages(ms, ev(3, "chunk", { messageId: "m1", content: "waiting" }));
    ms = applyEventToMessages(ms, opened(4, "m1", approval("r2", { kind: "question", options: [{ label: "A" }, { label: "B" }] })));
    expect(ms[0]!.parts.map((p) => p.type)).toEqual(["input-request", "text", "input-request"]);
    expect(pendingRequests(ms[0]!)).toHaveLength(2);
  });

  it("a part.updated for a request held updates it in place, by requestId", () => {
    let ms = applyEventToMessages([msg("m1", 1)], opened(2, "m1", approval("r1")));
    ms = applyEventToMessages(ms, opened(3, "m1", approval("r1", { title: "Deploy to staging?" })));
    expect(ms[0]!.parts).toHaveLength(1);
    expect((ms[0]!.parts[0] as InputRequestPart).title).toBe("Deploy to staging?");
  });

  it("a part.updated at or before the message's updatedSeq changes nothing (the message has it)", () => {
    const ms = [msg("m1", 5)];
    expect(applyEventToMessages(ms, opened(5, "m1", approval("r1")))).toBe(ms);
    expect(applyEventToMessages(ms, opened(6, "other", approval("r1")))).toBe(ms);
  });

  it("tool-call parts keep their fold through part.updated", () => {
    const ms = applyEventToMessages([msg("m1", 1)], ev(2, "part.updated", { messageId: "m1", part: { type: "tool-call", callId: "call_1", toolName: "deploy", status: "pending" } }));
    expect(ms[0]!.parts).toEqual([{ type: "tool-call", callId: "call_1", toolName: "deploy", status: "pending" }]);
    expect(ms[0]!.awaitingInput).toBeUndefined();
  });

  it("input.answered ends the request: status, answer, who and when; awaitingInput goes once none is pending", () => {
    let ms = applyEventToMessages([msg("m1", 1)], opened(2, "m1", approval("r1")));
    ms = applyEventToMessages(ms, opened(3, "m1", approval("r2")));
    ms = applyEventToMessages(ms, answered(4, "m1", "r1"));
    expect(ms[0]!.awaitingInput).toBe(true);
    expect(ms[0]!.parts[0]).toEqual({ ...approval("r1"), status: "answered", answer: { approved: true }, answeredBy: "alice", answeredAt: "2026-12-05T12:00:00.000Z" });
    ms = applyEventToMessages(ms, answered(5, "m1", "r2", { status: "expired", answer: undefined, answeredBy: undefined, reason: "expired" }));
    expect(ms[0]!.awaitingInput).toBeUndefined();
    expect(ms[0]!.parts[1]).toMatchObject({ status: "expired", reason: "expired" });
    expect((ms[0]!.parts[1] as InputRequestPart).answer).toBeUndefined();
  });

  it("input.answered applies to a message that has ended after it, and not again (the message has it as of its updatedSeq)", () => {
    const m = { ...applyInputRequest(msg("m1", 1), approval("r1")), status: "canceled" as const, updatedSeq: 7 };
    const once = applyEventToMessages([m], answered(8, "m1", "r1", { status: "canceled", answer: undefined, reason: "stopped" }));
    expect(once[0]!.parts[0]).toMatchObject({ status: "canceled", reason: "stopped" });
    expect(once[0]!.updatedSeq).toBe(8);
    expect(applyEventToMessages(once, answered(8, "m1", "r1", { status: "canceled", answer: undefined, reason: "stopped" }))).toBe(once);
    expect(applyInputAnswered(once[0]!, { messageId: "m1", requestId: "r1", status: "canceled", reason: "stopped" })).toBe(once[0]);
  });

  it("input.answered for a request or message not held changes nothing", () => {
    const ms = applyEventToMessages([msg("m1", 1)], opened(2, "m1", approval("r1")));
    expect(applyEventToMessages(ms, answered(3, "m1", "nope"))[0]!.parts).toBe(ms[0]!.parts);
    expect(applyEventToMessages(ms, answered(3, "m2", "r1"))).toBe(ms);
  });

  it("a late pending copy of a request that ended does not reopen it", () => {
    const m = applyInputAnswered(applyInputRequest(msg("m1", 1), approval("r1")), { messageId: "m1", requestId: "r1", status: "answered", answer: { approved: false } });
    expect(applyInputRequest(m, approval("r1"))).toBe(m);
  });

  it("bad data is a TypeError", () => {
    expect(() => applyEventToMessages([msg("m1", 1)], ev(2, "part.updated", { messageId: "m1", part: { type: "input-request" } }))).toThrow(TypeError);
    expect(() => applyEventToMessages([msg("m1", 1)], ev(2, "input.answered", { messageId: "m1" }))).toThrow(TypeError);
    expect(() => applyEventToMessages([msg("m1", 1)], ev(2, "part.updated", { messageId: "m1", part: { type: "tool-call" } }))).toThrow(TypeError);
  });
});

describe("the head's pending inputs", () => {
  const head = (lastSeq: number, pendingInputs?: Head["pendingInputs"]): Head => ({
    lastSeq, epoch: "e", lastTurn: 1, openTurn: null, claim: null, closed: false, lastClosedSeq: 0, ...(pendingInputs ? { pendingInputs } : {}),
  });
  const state = (h: Head, ...messages: Message[]): ConversationState =>
    foldFrame(emptyState, { type: "init", init: { recovered: false, position: { seq: h.lastSeq, epoch: "e" }, conversation: null!, head: h, guidance: null, messages } });

  it("a request opened after the head joins its list, oldest first, and leaves when it ends", () => {
    let s = state(head(1), msg("m1", 1));
    s = applyEvent(s, opened(2, "m1", approval("r1", { expiresAt: "2026-12-05T13:00:00Z" })));
    s = applyEvent(s, opened(3, "m1", approval("r2", { kind: "question", title: "Which region?" })));
    expect(s.head!.pendingInputs).toEqual([
      { requestId: "r1", messageId: "m1", agentId: "bob", kind: "approval", title: "Deploy to prod?", expiresAt: "2026-12-05T13:00:00Z" },
      { requestId: "r2", messageId: "m1", agentId: "bob", kind: "question", title: "Which region?" },
    ]);
    expect(s.headStale).toBe(false);
    s = applyEvent(s, answered(4, "m1", "r1"));
    expect(s.head!.pendingInputs!.map((p) => p.requestId)).toEqual(["r2"]);
    s = applyEvent(s, answered(5, "m1", "r2"));
    expect(s.head!.pendingInputs).toBeUndefined();
    expect(s.headStale).toBe(false);
  });

  it("events the head is as of already change nothing of it", () => {
    const h = head(5, [{ requestId: "r1", messageId: "m1", agentId: "bob", kind: "approval" }]);
    const s = state(h, msg("m1", 1));
    expect(applyEvent(s, opened(4, "m1", approval("r9"))).head).toBe(s.head);
    expect(applyEvent(s, answered(5, "m1", "r1")).head).toBe(s.head);
    expect(applyEvent(s, answered(6, "m1", "r1")).head!.pendingInputs).toBeUndefined();
  });

  it("applyPendingInput leaves a list alone for other events and for a request listed already", () => {
    const list = [{ requestId: "r1", messageId: "m1", agentId: "bob", kind: "approval" }];
    expect(applyPendingInput(list, opened(2, "m1", approval("r1")))).toBe(list);
    expect(applyPendingInput(list, ev(2, "chunk", { messageId: "m1", content: "x" }))).toBe(list);
    expect(applyPendingInput(list, ev(2, "part.updated", { messageId: "m1", part: { type: "tool-call", callId: "c", status: "running" } }))).toBe(list);
    expect(applyPendingInput(list, answered(3, "m1", "r2"))).toBe(list);
  });
});
