import { describe, expect, it } from "vitest";
import type { Guidance, QueuedPrompt } from "@parleyhq/client";
import { noRunnerFor, runnersOf } from "../src/lib/presence";

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
});
