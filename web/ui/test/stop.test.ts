import { describe, expect, it } from "vitest";
import type { QueuedPrompt } from "@parleyhq/client";
import { withStreaming } from "../src/lib/streaming";
import { stopTarget } from "../src/lib/stop";
import { msg } from "./helpers";

const prompt = (id: string, p: Partial<QueuedPrompt> = {}): QueuedPrompt => ({ id, mode: "followup", agentId: "human", parts: [1], until: null, ...p });

describe("stopTarget", () => {
  const asked = msg({ id: "p1", seq: 3, role: "user", agentId: "human", turnId: "p1" });

  it("names the prompt being answered while its answer streams", () => {
    const shown = [asked, msg({ id: "r1", seq: 5, agentId: "alice", turnId: "p1", replyTo: "p1", status: "streaming" })];
    expect(stopTarget([prompt("p1", { runner: "alice" }), prompt("p2")], shown)).toBe("p1");
  });

  it("is nothing once the answer's text has finished, while its prompt is still dispatched", () => {
    const shown = [asked, msg({ id: "r1", seq: 5, agentId: "alice", turnId: "p1", replyTo: "p1", status: "complete" })];
    expect(stopTarget([prompt("p1", { runner: "alice" }), prompt("p2")], shown)).toBeUndefined();
  });

  it("is nothing for a streaming message that answers no prompt being answered, or another runner's", () => {
    const other = msg({ id: "x1", seq: 6, agentId: "bob", turnId: "x1", status: "streaming" });
    expect(stopTarget([prompt("p2")], [asked, other])).toBeUndefined(); // p2 waits: nothing is answered
    expect(stopTarget([prompt("p1", { runner: "alice" })], [asked, other])).toBeUndefined();
    expect(stopTarget(undefined, [asked, other])).toBeUndefined();
  });

  it("is nothing once the prompt was aborted (the stop was sent)", () => {
    const shown = [asked, msg({ id: "r1", seq: 5, agentId: "alice", turnId: "p1", replyTo: "p1", status: "streaming" })];
    expect(stopTarget([prompt("p1", { runner: "alice", aborted: true })], shown)).toBeUndefined();
  });

  it("follows a task run's exchange, and a v1 runner's streaming text", () => {
    const run = msg({ id: "r1", seq: 5, agentId: "alice", turnId: "run-1", status: "streaming" });
    expect(stopTarget([prompt("p1", { runner: "alice", turnId: "run-1" })], [asked, run])).toBe("p1");
    const v1 = withStreaming([asked], [{ agentId: "alice", turn: 2, turnId: "p1", seq: 5, updatedSeq: 6, content: "Let me" }], "c");
    expect(stopTarget([prompt("p1", { runner: "alice" })], v1)).toBe("p1");
  });
});
