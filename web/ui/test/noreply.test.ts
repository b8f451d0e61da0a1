import { describe, expect, it } from "vitest";
import { noReplyIds, recipients } from "../src/lib/noreply";
import { conv, msg } from "./helpers";

describe("recipients", () => {
  const c = conv({ participants: ["sup", "rev"] });
  it("is the runner a prompt was dispatched to", () => {
    const q = msg({ id: "q", seq: 3, role: "user", agentId: "human", finality: "turn" });
    expect(recipients(q, c, new Map([["q", "sup"]]))).toEqual(["sup"]);
  });
  it("is nobody for a message that closed nothing (inside its own turn)", () => {
    expect(recipients(msg({ id: "m", seq: 3, agentId: "sup" }), c)).toEqual([]);
  });
  it("follows the turn policy for a message that closed its turn: the next it named, the round-robin successor, every other participant", () => {
    expect(recipients(msg({ id: "m", seq: 3, agentId: "sup", finality: "turn", next: "x" }), c)).toEqual(["x"]);
    expect(recipients(msg({ id: "m", seq: 3, agentId: "sup", finality: "turn" }), c)).toEqual(["rev"]);
    expect(recipients(msg({ id: "m", seq: 3, agentId: "rev", finality: "turn" }), c)).toEqual(["sup"]);
    expect(recipients(msg({ id: "m", seq: 3, agentId: "human", finality: "turn" }), c)).toEqual(["sup"]);
    const free = conv({ participants: ["c1", "a", "b"], turnPolicy: "free" });
    expect(recipients(msg({ id: "m", seq: 3, agentId: "a", finality: "turn" }), free)).toEqual(["b", "c1"]);
    expect(recipients(msg({ id: "m", seq: 3, agentId: "solo", finality: "turn" }), conv({ participants: ["solo"] }))).toEqual([]);
  });
  it("is who held a legacy row, but its author", () => {
    expect(recipients(msg({ id: "m", seq: 3, agentId: "a1", legacy: { row: 1, seenBy: ["a1", "a2"] } }), c)).toEqual(["a2"]);
  });
});

describe("noReplyIds", () => {
  const c = conv({ participants: ["sup", "rev"] });
  const sent = new Map([
    ["q1", "sup"],
    ["q2", "sup"],
  ]);
  it("marks a delivered message that nothing replies to, and only that", () => {
    const ms = [
      msg({ id: "q1", seq: 2, role: "user", agentId: "human", finality: "turn" }), // answered
      msg({ id: "a1", seq: 3, agentId: "sup", replyTo: "q1", finality: "turn" }), // a reply: never marked
      msg({ id: "q2", seq: 6, role: "user", agentId: "human", finality: "turn" }), // stopped before any answer
      msg({ id: "note", seq: 8, role: "user", agentId: "you", finality: "turn" }), // a note nobody answered
      msg({ id: "own", seq: 9, agentId: "sup" }), // inside its own turn: delivered to nobody
      msg({ id: "t", seq: 10, role: "tool", agentId: "calc", finality: "turn" }),
      msg({ id: "s", seq: 11, role: "system", agentId: "admin", finality: "turn", turn: 0 }),
    ];
    expect([...noReplyIds(ms, c, sent)].sort()).toEqual(["note", "q2"]);
  });
  it("never marks a message still streaming", () => {
    const ms = [msg({ id: "m", seq: 2, agentId: "sup", finality: "turn", status: "streaming" })];
    expect(noReplyIds(ms, c).size).toBe(0);
    expect(noReplyIds([{ ...ms[0]!, status: "complete" }], c).size).toBe(1);
  });
  it("counts a reply from any agent, also a late one", () => {
    const ms = [msg({ id: "q", seq: 2, role: "user", agentId: "human", finality: "turn" }), msg({ id: "x", seq: 40, agentId: "rev", replyTo: "q" })];
    expect(noReplyIds(ms, c).size).toBe(0);
  });
  it("decides legacy rows without a reply by time: answered if a recipient wrote after it", () => {
    const q = msg({ id: "q", seq: 2, role: "user", agentId: "human", createdAt: "2026-01-01T10:00:00.000Z", legacy: { row: 1, seenBy: ["a1"] } });
    const later = msg({ id: "r", seq: 3, agentId: "a1", createdAt: "2026-01-01T10:00:05.000Z", legacy: { row: 2 } });
    const other = msg({ id: "r", seq: 3, agentId: "a2", createdAt: "2026-01-01T10:00:05.000Z", legacy: { row: 2 } });
    expect(noReplyIds([q, later], c).size).toBe(0);
    expect([...noReplyIds([q, other], c)]).toEqual(["q"]);
  });
});
