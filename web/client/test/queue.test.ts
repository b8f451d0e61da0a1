// The prompt queue of a client that joined without a position: it reads
// the queue over HTTP while the stream goes on, and must end with exactly
// the server's queue however the read and the stream's prompt events
// interleave.

import { describe, expect, it } from "vitest";
import { emptyState, foldFrame, withQueue, type ConversationState, type Frame, type ParleyEvent, type QueuedPrompt } from "../src/index.js";

function queued(seq: number, id: string, content: string): Frame {
  return { type: "event", event: { conversationId: "c", seq, type: "prompt.queued", turn: 1, finality: "none", ts: null, data: { id, mode: "followup", agentId: "you", content } } as ParleyEvent };
}

function completed(seq: number, id: string): Frame {
  return { type: "event", event: { conversationId: "c", seq, type: "prompt.completed", turn: 1, finality: "none", ts: null, data: { id } } as ParleyEvent };
}

function prompt(id: string, seq: number, content: string): QueuedPrompt {
  return { id, mode: "followup", agentId: "you", parts: [seq], until: null, content };
}

/** A state just joined with no position: a snapshot as of seq 3, the queue not known. */
function joined(): ConversationState {
  const init = {
    type: "init",
    init: {
      position: { seq: 3, epoch: "e" },
      recovered: false,
      conversation: { id: "c", epoch: "e" },
      head: { lastSeq: 3, turn: 1, turnOwner: null, claims: [] },
      guidance: null,
      messages: [],
    },
  } as unknown as Frame;
  return foldFrame(emptyState, init);
}

const ids = (s: ConversationState) => s.queue.prompts.map((p) => p.content);

describe("the prompt queue read while the stream goes on", () => {
  it("keeps the prompts queued while the read was on its way", () => {
    // The read saw the queue as of seq 3 (empty); prompts 4 and 5 came on the stream meanwhile.
    let s = foldFrame(foldFrame(joined(), queued(4, "p1", "first")), queued(5, "p2", "second"));
    expect(s.queue.known).toBe(false);
    s = withQueue(s, [], 3);
    expect(s.queue.known).toBe(true);
    expect(ids(s)).toEqual(["first", "second"]);
    s = foldFrame(s, queued(6, "p3", "third"));
    expect(ids(s)).toEqual(["first", "second", "third"]);
  });

  it("takes no event twice that the read holds already", () => {
    let s = foldFrame(foldFrame(joined(), queued(4, "p1", "first")), queued(5, "p2", "second"));
    s = withQueue(s, [prompt("p1", 4, "first")], 4);
    expect(ids(s)).toEqual(["first", "second"]);
    s = foldFrame(s, completed(6, "p1"));
    expect(ids(s)).toEqual(["second"]);
  });

  it("lets an older read go once the queue is known", () => {
    let s = withQueue(joined(), [prompt("p1", 4, "first")], 4);
    s = foldFrame(s, queued(5, "p2", "second"));
    expect(withQueue(s, [], 3)).toBe(s);
    expect(ids(s)).toEqual(["first", "second"]);
  });

  it("stays unknown when the events it would need were let go to keep the bound", () => {
    let s = joined();
    for (let i = 0; i < 1001; i++) s = foldFrame(s, queued(4 + i, `p${i}`, `q${i}`));
    expect(s.queue.pending?.length).toBe(1000);
    expect(withQueue(s, [], 3).queue.known).toBe(false); // event 4 was let go: read again
    const read = withQueue(s, [prompt("p0", 4, "q0")], 4);
    expect(read.queue.known).toBe(true);
    expect(read.queue.prompts.length).toBe(1001);
  });
});
