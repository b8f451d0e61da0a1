import { describe, expect, it } from "vitest";
import { groupRows, repliesByParent, retriedIds, rowOf, type MessageRow, type Row } from "../src/lib/turns";
import { msg } from "./helpers";

const kinds = (rows: Row[]) => rows.map((r) => (r.kind === "message" ? `m:${r.message.id}${r.nested ? "*" : ""}` : r.kind === "turn" ? `t${r.turn}:${r.owner}` : `x:${r.turnId}(${r.count})`));

describe("groupRows", () => {
  // An exchange: q1 asked by the person (turn 1), answered by sup in turn 2,
  // who delegated to a worker (nested), then reviewer's turn 3 in the same
  // exchange; then a second exchange q2.
  const ms = [
    msg({ id: "q1", seq: 2, role: "user", agentId: "human", turn: 1, turnId: "q1", finality: "turn" }),
    msg({ id: "r1", seq: 5, agentId: "sup", turn: 2, turnId: "q1", replyTo: "q1" }),
    msg({ id: "w1", seq: 9, agentId: "worker", turn: 2, turnId: "q1" }),
    msg({ id: "r2", seq: 12, agentId: "sup", turn: 2, turnId: "q1", finality: "turn" }),
    msg({ id: "v1", seq: 14, agentId: "rev", turn: 3, turnId: "q1", replyTo: "r2" }),
    msg({ id: "q2", seq: 20, role: "user", agentId: "human", turn: 4, turnId: "q2" }),
  ];

  it("groups runs of one exchange, with a header per turn, and nests delegated workers", () => {
    expect(kinds(groupRows(ms))).toEqual(["x:q1(5)", "t1:human", "m:q1", "t2:sup", "m:r1", "m:w1*", "m:r2", "t3:rev", "m:v1", "x:q2(1)", "t4:human", "m:q2"]);
    const turn2 = groupRows(ms).find((r) => r.kind === "turn" && r.turn === 2);
    expect(turn2).toMatchObject({ owner: "sup", delegates: ["worker"] });
  });

  it("shows only the header of a collapsed exchange", () => {
    expect(kinds(groupRows(ms, { collapsed: new Set(["q1"]) }))).toEqual(["x:q1(5)", "x:q2(1)", "t4:human", "m:q2"]);
    expect(rowOf(groupRows(ms, { collapsed: new Set(["q1"]) }), "r1")).toBe(-1);
  });

  it("takes the turn's owner from the log when it knows it: a worker that wrote first is still nested", () => {
    const worker = [msg({ id: "w", seq: 3, agentId: "worker", turn: 2, turnId: "q" }), msg({ id: "s", seq: 4, agentId: "sup", turn: 2, turnId: "q" })];
    expect(kinds(groupRows(worker))).toEqual(["x:q(2)", "t2:worker", "m:w", "m:s*"]);
    expect(kinds(groupRows(worker, { owners: new Map([[2, "sup"]]) }))).toEqual(["x:q(2)", "t2:sup", "m:w*", "m:s"]);
  });

  it("keeps keys while the messages stay, so that rows are not remounted as text streams", () => {
    const a = groupRows(ms).map((r) => r.key);
    const grown = ms.map((m) => (m.id === "q2" ? { ...m, content: "more" } : m));
    expect(groupRows(grown).map((r) => r.key)).toEqual(a);
    const row = groupRows(grown).find((r): r is MessageRow => r.kind === "message" && r.message.id === "r1");
    expect(row?.message).toBe(ms[1]); // the same object: memoized views skip it
  });

  it("starts a new run when an exchange comes back after another (a late reply in a thread)", () => {
    const late = [...ms, msg({ id: "v2", seq: 30, agentId: "rev", turn: 5, turnId: "q1", replyTo: "r1" })];
    expect(kinds(groupRows(late)).slice(-3)).toEqual(["x:q1(1)", "t5:rev", "m:v2"]);
  });

  it("handles no messages and turn 0", () => {
    expect(groupRows([])).toEqual([]);
    expect(kinds(groupRows([msg({ id: "s", seq: 2, role: "system", agentId: "admin", turn: 0, turnId: "" })]))).toEqual(["x:s(1)", "t0:admin", "m:s"]);
  });
});

describe("marks from the messages", () => {
  it("finds the failed attempts of failovers and the replies of each message", () => {
    const ms = [
      msg({ id: "p", seq: 2, role: "user" }),
      msg({ id: "a1", seq: 3, replyTo: "p", status: "error" }),
      msg({ id: "a2", seq: 6, replyTo: "p", retryOf: "a1" }),
      msg({ id: "v", seq: 9, replyTo: "a2", agentId: "rev" }),
    ];
    expect([...retriedIds(ms)]).toEqual(["a1"]);
    const replies = repliesByParent(ms);
    expect(replies.get("p")?.map((m) => m.id)).toEqual(["a1", "a2"]);
    expect(replies.get("a2")?.map((m) => m.id)).toEqual(["v"]);
    expect(replies.has("v")).toBe(false);
  });
});
