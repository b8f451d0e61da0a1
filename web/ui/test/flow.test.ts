import { describe, expect, it } from "vitest";
import { dispatches, layoutFlow, mergeEvents, turnOwners } from "../src/lib/flow";
import { ev, msg, msgEv } from "./helpers";

// A demo-like log: a person's prompt (turn 1), the supervisor's answer
// (turn 2) with a tool update and chunks between, a delegation to a
// worker who writes into turn 2, the supervisor closes it; the reviewer
// replies in turn 3; a claim, a reset, an abort, a revert and a task run.
const q1 = msg({ id: "q1", seq: 2, role: "user", agentId: "human", turn: 1, turnId: "q1", finality: "turn" });
const a1 = msg({ id: "a1", seq: 4, agentId: "sup", turn: 2, turnId: "q1", replyTo: "q1", status: "streaming" });
const w1 = msg({ id: "w1", seq: 9, agentId: "worker", turn: 2, turnId: "q1" });
const a2 = msg({ id: "a2", seq: 11, agentId: "sup", turn: 2, turnId: "q1", finality: "turn" });
const v1 = msg({ id: "v1", seq: 13, agentId: "rev", turn: 3, turnId: "q1", replyTo: "a2", finality: "turn" });
const log = [
  ev(1, "conversation.created", {}),
  msgEv(q1),
  ev(3, "prompt.dispatched", { id: "q1", runner: "sup" }),
  msgEv(a1),
  ev(5, "chunk", { messageId: "a1", content: "Let me" }),
  ev(6, "part.updated", { messageId: "a1", part: { type: "tool-call", callId: "c", status: "running" } }),
  ev(7, "message.updated", { ...a1, status: "complete" }, { agentId: "sup", turn: 2 }),
  ev(8, "delegation", { from: "sup", to: "worker", turn: 2 }, { agentId: "sup", turn: 2 }),
  msgEv(w1),
  ev(10, "trace", { payload: {} }, { agentId: "worker", turn: 2 }),
  msgEv(a2),
  ev(12, "turn.claimed", { agentId: "rev", turn: 3, expiresAt: null }, { agentId: "rev", turn: 3 }),
  msgEv(v1),
  ev(14, "turn.reset", { turn: 4 }, { agentId: "sup", turn: 4 }),
  ev(15, "turn.aborted", { turn: 4, reason: "tool crashed" }, { agentId: "sup", turn: 4 }),
  ev(16, "messages.removed", { messageIds: ["v1"] }, { agentId: "admin" }),
  ev(17, "task.run", { taskId: "t1", runId: "r" }, { agentId: "scheduler" }),
];

describe("layoutFlow", () => {
  const l = layoutFlow(log, { agents: ["sup", "rev"], laneWidth: 100, step: 20, top: 30 });

  it("puts the participants' lanes first, then every agent as it first acts", () => {
    expect(l.lanes.map((x) => x.agent)).toEqual(["sup", "rev", "human", "worker", "admin", "scheduler"]);
    expect(l.lanes.map((x) => x.x)).toEqual([50, 150, 250, 350, 450, 550]);
    expect(l.width).toBe(600);
  });

  it("takes one step per event that moves the conversation on, none for chunks, tool updates or the queue", () => {
    // message q1, a1, delegation, w1, trace, a2, claim, v1, reset, abort, revert, task: 12 steps
    expect(l.height).toBe(30 + 12 * 20 + 20);
    expect(l.firstSeq).toBe(2);
    expect(l.lastSeq).toBe(17);
  });

  it("draws a block per agent and turn: the owner's, then the worker's, then the owner's again", () => {
    const blocks = l.blocks.map((b) => `${b.turn}:${b.agent}${b.delegate ? "*" : ""}:${b.end}:${b.messages}`);
    expect(blocks).toEqual(["1:human:closed:1", "2:sup:continued:1", "2:worker*:closed:1", "2:sup:closed:1", "3:rev:closed:1"]);
    const [, sup] = l.blocks;
    expect(sup).toMatchObject({ y0: 50, y1: 70, messageId: "a1", seq0: 4, seq1: 4 });
    const worker = l.blocks[2]!;
    expect(worker).toMatchObject({ lane: 3, seq0: 9, seq1: 10, messageId: "w1", y0: 90, y1: 130 });
  });

  it("draws delegations and replies between agents as arrows", () => {
    expect(l.arrows.map((a) => `${a.kind}:${l.lanes[a.from]!.agent}->${l.lanes[a.to]!.agent}@${a.seq}`)).toEqual([
      "reply:human->sup@4",
      "delegation:sup->worker@8",
      "reply:sup->rev@13",
    ]);
    const d = l.arrows[1]!;
    expect(d.y0).toBe(d.y1);
  });

  it("counts the messages of a block that a revert removed", () => {
    expect(l.blocks.map((b) => b.removed)).toEqual([0, 0, 0, 0, 1]);
  });

  it("marks claims, resets, aborts, reverts and task runs on the lane of who did them", () => {
    expect(l.marks.map((m) => `${m.kind}:${l.lanes[m.lane]!.agent}`)).toEqual(["claim:rev", "reset:sup", "abort:sup", "revert:admin", "task:scheduler"]);
    expect(l.marks[2]!.label).toBe("turn 4 aborted by sup: tool crashed");
  });

  it("leaves a turn open until a message closes it, and shows a stopped answer", () => {
    const open = layoutFlow([msgEv(q1), msgEv(a1)]);
    expect(open.blocks.map((b) => b.end)).toEqual(["closed", "open"]);
    const stopped = layoutFlow([msgEv(q1), msgEv(a1), ev(5, "message.updated", { ...a1, status: "canceled", finality: "turn" })]);
    expect(stopped.blocks.map((b) => b.end)).toEqual(["closed", "canceled"]);
  });

  it("ends every block of an aborted turn", () => {
    const x = layoutFlow([msgEv(a1), ev(5, "turn.aborted", { turn: 2 }, { agentId: "sup", turn: 2 })]);
    expect(x.blocks.map((b) => b.end)).toEqual(["aborted"]);
  });

  it("is empty for an empty log", () => {
    const e = layoutFlow([]);
    expect(e).toMatchObject({ lanes: [], blocks: [], arrows: [], marks: [], firstSeq: 0, lastSeq: 0 });
  });

  it("is a function of its input: the same log gives the same picture", () => {
    expect(layoutFlow(log, { agents: ["sup", "rev"] })).toEqual(layoutFlow([...log], { agents: ["sup", "rev"] }));
  });
});

describe("what the log says about turns and prompts", () => {
  it("names each turn's owner and each prompt's runner", () => {
    expect([...turnOwners(log)]).toEqual([
      [1, "human"],
      [2, "sup"],
      [3, "rev"],
    ]);
    expect([...dispatches(log)]).toEqual([["q1", "sup"]]);
  });
});

describe("mergeEvents", () => {
  const a = [ev(1, "message", {}), ev(2, "message", {})];
  it("appends what comes after, as it is", () => {
    const b = [ev(3, "message", {}), ev(4, "message", {})];
    expect(mergeEvents(a, b).map((e) => e.seq)).toEqual([1, 2, 3, 4]);
    expect(mergeEvents(a, [])).toBe(a);
  });
  it("merges overlapping pages in seq order, each seq once", () => {
    const b = [ev(0, "x", {}), ev(2, "message", { again: true }), ev(5, "message", {})];
    const m = mergeEvents(a, b);
    expect(m.map((e) => e.seq)).toEqual([0, 1, 2, 5]);
    expect(m[2]!.data).toEqual({ again: true });
  });
});
