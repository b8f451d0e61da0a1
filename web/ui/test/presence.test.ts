import { describe, expect, it } from "vitest";
import type { Guidance, QueuedPrompt } from "@parleyhq/client";
import type { Head } from "@parleyhq/client";
import { noRunnerFor, runnersOf, turnInTheWay, waitingOn } from "../src/lib/presence";

const g = (runners?: string[]): Guidance => ({ nextAgentId: "", kind: "start_turn", turn: 1, afterSeq: 1, ...(runners ? { runners } : {}) });
const p = (x: Partial<QueuedPrompt>): QueuedPrompt => ({ id: "p", mode: "followup", agentId: "you", parts: [1], until: null, ...x });

describe("presence", () => {
  it("reads the runners from the guidance, none when it names none, unknown without one", () => {
    expect(runnersOf(g(["bot"]))).toEqual(["bot"]);
    expect(runnersOf(g())).toEqual([]);
    expect(runnersOf(null)).toBeNull();
  });

  it("says a waiting prompt has no runner when its addressee has none, or nobody has one", () => {
    expect(noRunnerFor(p({}), [])).toBe(true);
    expect(noRunnerFor(p({}), ["bot"])).toBe(false);
    expect(noRunnerFor(p({ to: "helper" }), ["bot"])).toBe(true);
    expect(noRunnerFor(p({ to: "bot" }), ["bot"])).toBe(false);
    expect(noRunnerFor(p({ runner: "bot" }), [])).toBe(false); // being answered
    expect(noRunnerFor(p({}), null)).toBe(false); // presence unknown
  });

  it("says what turn the first waiting prompt waits for, when nothing is answered", () => {
    const open = (owner: string): Guidance => ({ nextAgentId: owner, kind: "continue_turn", turn: 4, afterSeq: 9 });
    const q = [p({ id: "a", agentId: "you" }), p({ id: "b", agentId: "you" })];
    expect(turnInTheWay(q, 0, open("bob"))).toBe("waits for bob's open turn 4 to end");
    expect(turnInTheWay(q, 1, open("bob"))).toBeNull(); // behind another prompt
    expect(turnInTheWay(q, 0, open("you"))).toBeNull(); // its asker's own turn does not hold it
    expect(turnInTheWay(q, 0, g(["bot"]))).toBeNull(); // no open turn
    expect(turnInTheWay(q, 0, null)).toBeNull();
    expect(turnInTheWay([p({ id: "x", runner: "bot" }), ...q], 1, open("bob"))).toBeNull(); // one is answered
  });
});

describe("waitingOn", () => {
  const h = (x: Partial<Head>): Head => ({ lastSeq: 9, epoch: "e", lastTurn: 3, openTurn: null, claim: null, closed: false, lastClosedSeq: 0, ...x });
  const open = { turn: 4, owner: "bob", openedSeq: 8 };
  it("names a person first, then the open turn's owner, a claim, a runner for the next prompt, or nobody", () => {
    const req = { requestId: "r", messageId: "m", agentId: "bob", kind: "approval" };
    expect(waitingOn(h({ openTurn: open, pendingInputs: [req, { ...req, requestId: "s" }] }), g(["bob"]), [])).toBe("a person: 2 requests");
    expect(waitingOn(h({ openTurn: open }), g(["bob"]), [])).toBe("bob to end turn 4");
    expect(waitingOn(h({ openTurn: open }), g([]), [])).toBe("bob to end turn 4 (no runner)");
    expect(waitingOn(h({ claim: { agentId: "rev", turn: 4, expiresAt: "" } }), g([]), [])).toBe("rev, who claimed turn 4");
    expect(waitingOn(h({}), g([]), [p({ to: "helper" })])).toBe("a runner of helper");
    expect(waitingOn(h({}), g(["helper"]), [p({ to: "helper" })])).toBe("helper to take a prompt");
    expect(waitingOn(h({}), g(["bot"]), [p({ runner: "bot" })])).toBe("bot to answer");
    expect(waitingOn(h({}), g(["bot"]), [])).toBe("nobody");
    expect(waitingOn(h({ closed: true }), null, [])).toBe("nobody: closed");
    expect(waitingOn(null, null, undefined)).toBeNull();
  });
});
