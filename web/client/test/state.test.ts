// The folds beside the messages: guidance, head and the prompt queue.

import { describe, expect, it } from "vitest";
import {
  emptyState,
  foldFrame,
  withQueue,
  withView,
  type ConversationState,
  type EventType,
  type Frame,
  type Guidance,
  type Head,
  type Init,
  type ParleyEvent,
} from "../src/index.js";

const head = (lastSeq: number, owner?: string): Head => ({
  lastSeq, epoch: "e", lastTurn: owner ? 1 : 0, openTurn: owner ? { turn: 1, owner, openedSeq: lastSeq } : null,
  claim: null, closed: false, lastClosedSeq: 0,
});
const guidance = (next: string, afterSeq: number): Guidance => ({ nextAgentId: next, kind: "start_turn", turn: 1, afterSeq });
const init = (seq: number, recovered = false): Frame => ({
  type: "init",
  init: { recovered, position: { seq, epoch: "e" }, head: head(seq), guidance: guidance("alice", seq), messages: [], conversation: { id: "c", epoch: "e" } } as unknown as Init,
});
const ev = (seq: number, type: EventType, data: unknown, agentId = "human"): Frame => ({
  type: "event",
  event: { conversationId: "c", seq, type, turn: 0, agentId, finality: "none", ts: null, data } as ParleyEvent,
});
const fold = (s: ConversationState, ...fs: Frame[]) => fs.reduce(foldFrame, s);
const ids = (s: ConversationState) => s.queue.prompts.map((p) => `${p.id}${p.runner ? "@" + p.runner : ""}${p.aborted ? "!" : ""}:${p.content}`).join(" ");

describe("guidance", () => {
  it("takes guidance frames in order, ignores older ones, and ends when the conversation closes", () => {
    let s = fold(emptyState, init(5));
    expect(s.guidance?.nextAgentId).toBe("alice");
    s = fold(s, { type: "guidance", guidance: guidance("bob", 4) });
    expect(s.guidance?.nextAgentId).toBe("alice"); // older than the init's
    s = fold(s, ev(6, "turn.claimed", {}), { type: "guidance", guidance: guidance("bob", 6) });
    expect(s.guidance?.nextAgentId).toBe("bob");
    const same = fold(s, { type: "guidance", guidance: guidance("carol", 6) });
    expect(same.guidance?.nextAgentId).toBe("carol"); // a runner came: same seq, new guidance
    s = fold(s, ev(7, "message", { id: "m", seq: 7, finality: "conversation", parts: [], content: "" }));
    expect(s.guidance).toBeNull();
    s = withView(s, { conversation: s.conversation!, head: head(6), guidance: guidance("bob", 6) });
    expect(s.guidance).toBeNull(); // the view is older than what the stream said
  });
});

describe("head", () => {
  it("is stale after an event that may change it, until a view as new comes", () => {
    let s = fold(emptyState, init(5));
    s = fold(s, ev(6, "chunk", { messageId: "x", content: "a" }), ev(7, "prompt.queued", { id: "p", content: "q" }));
    expect(s.headStale).toBe(false);
    expect(s.position).toEqual({ seq: 7, epoch: "e" });
    s = fold(s, ev(8, "message", { id: "m", seq: 8, finality: "none", parts: [], content: "" }));
    expect(s.headStale).toBe(true);
    const before = s;
    s = withView(s, { conversation: s.conversation!, head: head(7, "bob"), guidance: guidance("bob", 7) });
    expect(s.headStale).toBe(true); // the view is older than event 8
    s = withView(before, { conversation: s.conversation!, head: head(8, "bob"), guidance: guidance("bob", 8) });
    expect(s.headStale).toBe(false);
    expect(s.head?.openTurn?.owner).toBe("bob");
    s = withView(s, { conversation: s.conversation!, head: head(3), guidance: null });
    expect(s.head?.lastSeq).toBe(8); // an older view changes nothing
  });
});

describe("the prompt queue", () => {
  it("is known from the log's start, and folds every prompt event as the server does", () => {
    let s = fold(emptyState, init(0, true), ev(1, "conversation.created", { id: "c", epoch: "e" }));
    expect(s.queue).toEqual({ known: true, asOf: 1, prompts: [] });
    s = fold(s,
      ev(2, "prompt.queued", { id: "a", content: "first", mode: "followup", until: null }),
      ev(3, "prompt.queued", { id: "b", content: "second", mode: "collect", until: "2026-01-01T00:00:02.000Z" }),
      ev(4, "prompt.queued", { id: "b2", into: "b", content: "more ü", mode: "collect", until: "2026-01-01T00:00:03.000Z" }),
      ev(5, "prompt.dispatched", { id: "a", runner: "alice" }, "alice"),
      ev(6, "prompt.queued", { id: "s", content: "steer", mode: "steer", until: null }),
      ev(7, "prompt.aborted", { id: "a", runner: "alice", reason: "steered" }));
    expect(ids(s)).toBe("a@alice!:first s:steer b:second\n\nmore ü");
    expect(s.queue.prompts[2]).toMatchObject({ parts: [3, 4], bytes: 6 + 2 + 7, until: "2026-01-01T00:00:03.000Z" });
    s = fold(s, ev(8, "prompt.canceled", { id: "a", reason: "aborted" }), ev(9, "prompt.promoted", { id: "b" }));
    expect(ids(s)).toBe("b:second\n\nmore ü s:steer");
    s = fold(s, ev(10, "prompt.dispatched", { id: "s", runner: "bob" }), ev(11, "prompt.requeued", { id: "s" }));
    expect(ids(s)).toBe("s:steer b:second\n\nmore ü");
    expect(s.queue.prompts[0]).toMatchObject({ written: true });
    s = fold(s, ev(12, "prompt.completed", { id: "s" }), ev(13, "prompt.canceled", { id: "b", reason: "withdrawn" }));
    expect(ids(s)).toBe("");
  });

  it("is unknown after a snapshot, and continues a queue read over HTTP after the seq it is exact as of", () => {
    let s = fold(emptyState, init(5));
    expect(s.queue.known).toBe(false);
    s = withQueue(s, [{ id: "a", mode: "followup", agentId: "human", parts: [3], until: null, content: "read" }], 7);
    s = fold(s, ev(6, "prompt.queued", { id: "x", content: "in the queue read already" }), ev(7, "prompt.canceled", { id: "a" }));
    expect(ids(s)).toBe("a:read");
    s = fold(s, ev(8, "prompt.queued", { id: "b", content: "new" }));
    expect(ids(s)).toBe("a:read b:new");
    expect(withQueue(s, [], 7)).toBe(s); // older than what it holds
    const recovered = fold(s, init(8, true));
    expect(recovered.queue).toBe(s.queue);
    expect(fold(s, init(9)).queue.known).toBe(false);
  });
});

describe("the conversation", () => {
  it("folds conversation.updated: the changed fields whole, the rest kept", () => {
    const made = { id: "c", epoch: "e", title: "old", participants: ["alice", "bob"], members: ["m"], turnPolicy: "round-robin", messageFormat: "v2", metadata: { k: 1 }, createdBy: "alice", createdAt: null };
    let s = fold(emptyState, init(0, true), ev(1, "conversation.created", made));
    s = fold(s, ev(2, "conversation.updated", { title: "new", metadata: null, participants: ["alice", "carol"], members: [], updatedBy: "alice" }, "alice"));
    expect(s.conversation).toEqual({ id: "c", epoch: "e", title: "new", participants: ["alice", "carol"], turnPolicy: "round-robin", messageFormat: "v2", createdBy: "alice", createdAt: null });
    expect(s.headStale).toBe(false); // it changes nothing of the head
    expect(made.participants).toEqual(["alice", "bob"]); // immutable updates
    const again = fold(s, ev(3, "conversation.updated", { title: "", metadata: { x: [1] }, participants: [], members: ["dave"], updatedBy: "admin" }, "admin"));
    expect(again.conversation).toMatchObject({ participants: [], members: ["dave"], metadata: { x: [1] } });
    expect(again.conversation?.title).toBeUndefined();
    expect(s.conversation?.title).toBe("new");
  });
});
