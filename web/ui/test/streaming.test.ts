import { describe, expect, it } from "vitest";
import type { StreamingText } from "@parleyhq/client";
import { isStreamingText, withStreaming } from "../src/lib/streaming";
import { groupRows } from "../src/lib/turns";
import { msg } from "./helpers";

describe("withStreaming", () => {
  const ms = [
    msg({ id: "p1", seq: 3, role: "user", agentId: "human", turn: 1, turnId: "p1", finality: "turn" }),
    msg({ id: "r1", seq: 8, agentId: "alice", turn: 2, turnId: "p1" }),
    msg({ id: "b1", seq: 12, agentId: "bob", turn: 3, turnId: "p1" }),
  ];
  const text = (agentId: string, seq: number, content: string): StreamingText => ({ agentId, turn: 2, turnId: "p1", seq, updatedSeq: seq + 1, content });

  it("is the very messages when nothing streams", () => {
    expect(withStreaming(ms, [], "c")).toBe(ms);
  });

  it("puts each text among the messages by seq, as a streaming message of its agent in its exchange", () => {
    const a = text("alice", 10, "Let me look.");
    const shown = withStreaming(ms, [a, text("carol", 20, "Hm")], "c");
    expect(shown.map((m) => m.id)).toEqual(["p1", "r1", "~streaming~alice", "b1", "~streaming~carol"]);
    const m = shown[2]!;
    expect(m).toMatchObject({ agentId: "alice", role: "assistant", status: "streaming", content: "Let me look.", turn: 2, turnId: "p1", conversationId: "c" });
    expect(m.parts).toEqual([{ type: "text", text: "Let me look.", streaming: true }]);
    expect(isStreamingText(m)).toBe(true);
    expect(ms.some(isStreamingText)).toBe(false);
    // The same text gives the same message (its row is not drawn again); a grown one a new one.
    expect(withStreaming(ms.slice(0, 2), [a], "c")[2]).toBe(m);
    expect(withStreaming(ms, [{ ...a, content: "Let me look. Now" }], "c")[2]).not.toBe(m);
    // It joins its exchange's rows.
    const rows = groupRows(shown);
    expect(rows.filter((r) => r.kind === "exchange")).toHaveLength(1);
  });
});
