// The merge rules of the stream protocol, case by case: a port of the Go
// SDK's client/fold_test.go.

import { describe, expect, it } from "vitest";
import {
  ConversationFold,
  applyEventToMessages,
  applyEventToStreamingTexts,
  emptyState,
  foldFrame,
  foldStreamingTexts,
  noStreamingTexts,
  foldMessages,
  hold,
  missingMessages,
  noMessages,
  summarize,
  type EventType,
  type Frame,
  type Message,
  type MessageStatus,
  type Messages,
  type ParleyEvent,
  type Part,
  type StreamingText,
  type StreamingTexts,
  type ToolCallPart,
} from "../src/index.js";

function ev(seq: number, type: EventType, data: unknown): Frame {
  return { type: "event", event: { conversationId: "c", seq, type, turn: 1, finality: "none", ts: null, data } as ParleyEvent };
}

function msg(id: string, seq: number, updated: number, status: MessageStatus, ...parts: Part[]): Message {
  const content = parts.map((p) => (p.type === "text" ? (p.text ?? "") : "")).join("");
  return {
    id, conversationId: "c", seq, updatedSeq: updated, status, parts, content, role: "assistant", agentId: "bob",
    turn: 1, turnId: "q", depth: 0, finality: "none", createdAt: null, updatedAt: null,
  };
}

const text = (s: string, streaming: boolean): Part => (streaming ? { type: "text", text: s, streaming } : { type: "text", text: s });
const chunk = (id: string, s: string) => ({ messageId: id, content: s });
function toolUpdate(id: string, call: string, status: string, args?: string) {
  const part: ToolCallPart = { type: "tool-call", callId: call, status };
  if (args !== undefined) Object.assign(part, { toolName: "search", args: JSON.parse(args) as unknown });
  return { messageId: id, part };
}
const summary = (m: Message) => summarize(m, 600_000);
const init = (recovered: boolean, ...messages: Message[]): Frame => ({
  type: "init",
  init: {
    recovered, position: { seq: 0, epoch: "e" }, conversation: null!, guidance: null, messages,
    head: { lastSeq: 0, epoch: "e", lastTurn: 0, openTurn: null, claim: null, closed: false, lastClosedSeq: 0 },
  },
});

/** An init frame with a snapshot's streaming texts. */
const withTexts = (f: Frame, ...streaming: StreamingText[]): Frame => {
  const { init } = f as Extract<Frame, { type: "init" }>;
  return { type: "init", init: { ...init, streaming } };
};

/** The messages as "id:status:content[parts]", as fold_test.go's show. */
function show(ms: Messages): string {
  return ms
    .map((m) => {
      const kinds = m.parts.map((p) => {
        let k: string = p.type;
        if (p.type === "text" && p.streaming) k += "~";
        if (p.type === "tool-call") k += "(" + [p.toolName ?? "", p.status ?? "", p.args === undefined ? "" : JSON.stringify(p.args)].join(" ").trim() + ")";
        return k;
      });
      if (m.summarized) kinds.push(`summary of ${m.summarized.bytes} bytes`);
      return `${m.id}:${m.status}:${JSON.stringify(m.content)}[${kinds.join(" ")}]`;
    })
    .join(" ");
}

const tool: Part = { type: "tool-call", callId: "c1", toolName: "search", status: "running" };

const cases: [string, Frame[], string][] = [
  ["a snapshot's streaming message grows by the chunks after it",
    [init(false, msg("r1", 3, 9, "streaming", text("The ", true))), ev(10, "chunk", chunk("r1", "answer"))],
    `r1:streaming:"The answer"[text~]`],
  ["a chunk the message already holds is skipped",
    [init(false, msg("r1", 3, 9, "streaming", text("The answer", true))), ev(9, "chunk", chunk("r1", "answer")), ev(10, "chunk", chunk("r1", "."))],
    `r1:streaming:"The answer."[text~]`],
  ["a chunk of a message not held is ignored", [init(false), ev(5, "chunk", chunk("r9", "lost?"))], ``],
  ["a message starts empty and grows",
    [init(false), ev(4, "message", msg("r1", 4, 4, "streaming")), ev(5, "chunk", chunk("r1", "one ")), ev(6, "chunk", chunk("r1", "two"))],
    `r1:streaming:"one two"[text~]`],
  ["text after a tool call starts a new part",
    [init(false), ev(4, "message", msg("r1", 4, 4, "streaming")), ev(5, "chunk", chunk("r1", "Let me look. ")),
      ev(6, "message.updated", msg("r1", 4, 6, "streaming", text("Let me look. ", false), tool)), ev(7, "chunk", chunk("r1", "Found it."))],
    `r1:streaming:"Let me look. Found it."[text tool-call(search running) text~]`],
  ["part.updated adds a tool call, which ends the text part",
    [init(false), ev(4, "message", msg("r1", 4, 4, "streaming")), ev(5, "chunk", chunk("r1", "Let me look. ")),
      ev(6, "part.updated", toolUpdate("r1", "c1", "running", `{"q":"x"}`)), ev(7, "chunk", chunk("r1", "Found it.")),
      ev(8, "part.updated", toolUpdate("r1", "c1", "completed"))],
    `r1:streaming:"Let me look. Found it."[text tool-call(search completed {"q":"x"}) text~]`],
  ["part.updated changes the call it names and keeps what it leaves out",
    [init(false, msg("r1", 3, 9, "streaming", text("a", false), { type: "tool-call", callId: "c1", toolName: "search", status: "running", args: { q: "x" } })),
      ev(9, "part.updated", toolUpdate("r1", "c1", "error")), // already held
      ev(10, "part.updated", toolUpdate("r1", "c1", "completed"))],
    `r1:streaming:"a"[text tool-call(search completed {"q":"x"})]`],
  ["a summarized message ignores chunks and tool updates",
    [init(false, summary(msg("r1", 3, 9, "streaming", text("big", true))), msg("m5", 5, 5, "complete", text("small", false))),
      ev(10, "chunk", chunk("r1", "more")), ev(11, "part.updated", toolUpdate("r1", "c1", "running", `{}`))],
    `r1:streaming:""[summary of 600000 bytes] m5:complete:"small"[text]`],
  ["a summary holds no text, whatever it came with",
    [init(false, { ...msg("r1", 3, 9, "streaming", text("big", true)), summarized: { bytes: 7 } })],
    `r1:streaming:""[summary of 7 bytes]`],
  ["message.updated replaces a summarized message",
    [init(false, summary(msg("r1", 3, 9, "streaming", text("big", true)))), ev(10, "chunk", chunk("r1", "more")),
      ev(11, "message.updated", msg("r1", 3, 11, "complete", text("big and more", false)))],
    `r1:complete:"big and more"[text]`],
  ["message.updated replaces the whole message",
    [init(false, msg("r1", 3, 3, "streaming", text("draft", true))),
      ev(8, "message.updated", msg("r1", 3, 8, "canceled", text("final", false), { type: "finish", reason: "canceled" }))],
    `r1:canceled:"final"[text finish]`],
  ["message.updated of a message not held holds it",
    [init(false, msg("m5", 5, 5, "complete", text("newer", false))), ev(9, "message.updated", msg("m2", 2, 9, "complete", text("older", false)))],
    `m2:complete:"older"[text] m5:complete:"newer"[text]`],
  ["messages.removed drops the messages",
    [init(false, msg("a", 2, 2, "complete", text("a", false)), msg("b", 3, 3, "streaming")), ev(4, "messages.removed", { messageIds: ["b", "ghost"] })],
    `a:complete:"a"[text]`],
  ["a recovered init keeps what is held",
    [init(false, msg("a", 2, 2, "complete", text("a", false))), init(true), ev(3, "message", msg("b", 3, 3, "complete", text("b", false)))],
    `a:complete:"a"[text] b:complete:"b"[text]`],
  ["an init that is not recovered replaces everything",
    [init(false, msg("a", 2, 2, "complete", text("a", false))), init(false, msg("z", 7, 7, "complete", text("z", false)))],
    `z:complete:"z"[text]`],
  ["other events change nothing",
    [init(false, msg("a", 2, 2, "complete", text("a", false))), ev(3, "turn.claimed", { agentId: "b", turn: 2, expiresAt: null }),
      { type: "guidance", guidance: { nextAgentId: "b", kind: "start_turn", turn: 2, afterSeq: 3 } }],
    `a:complete:"a"[text]`],
];

describe("the merge rules", () => {
  it.each(cases)("%s", (_name, frames, want) => {
    let ms = noMessages;
    for (const f of frames) ms = foldMessages(ms, f);
    expect(show(ms)).toBe(want);
  });

  it("refuses a chunk whose data is not a chunk, changing nothing", () => {
    const ms = foldMessages(noMessages, init(false, msg("r1", 1, 1, "streaming")));
    const bad = ev(3, "chunk", "not a chunk") as Extract<Frame, { type: "event" }>;
    expect(() => applyEventToMessages(ms, bad.event)).toThrow(TypeError);
  });

  it("returns what it was given when nothing changed, and keeps what did not change", () => {
    const ms = foldMessages(noMessages, init(false, msg("a", 2, 2, "complete", text("a", false)), msg("r1", 3, 9, "streaming", text("x", true))));
    const e = (f: Frame) => (f as Extract<Frame, { type: "event" }>).event;
    expect(applyEventToMessages(ms, e(ev(9, "chunk", chunk("r1", "old"))))).toBe(ms);
    expect(applyEventToMessages(ms, e(ev(10, "turn.claimed", {})))).toBe(ms);
    expect(applyEventToMessages(ms, e(ev(10, "messages.removed", { messageIds: ["ghost"] })))).toBe(ms);
    const next = applyEventToMessages(ms, e(ev(10, "chunk", chunk("r1", "y"))));
    expect(next).not.toBe(ms);
    expect(next[0]).toBe(ms[0]); // "a" did not change
    expect(next[1]).not.toBe(ms[1]);
  });
});

describe("copies", () => {
  it("what the fold holds does not change when the frames it was given do, and the other way round", () => {
    const m = msg("r1", 3, 3, "streaming", text("The ", true));
    const f = new ConversationFold();
    f.apply(init(false, m));
    f.apply(ev(4, "chunk", chunk("r1", "end")));
    expect(m.parts[0]).toEqual(text("The ", true));
    expect(m.content).toBe("The ");
    (m.parts[0] as { text: string }).text = "changed";
    expect(f.messages[0]!.content).toBe("The end");
    expect(f.messages[0]!.parts[0]).toEqual(text("The end", true));
    const held = f.messages[0]!;
    f.apply(ev(5, "chunk", chunk("r1", "!")));
    expect(held.parts[0]).toEqual(text("The end", true));
    expect(f.messages[0]!.parts[0]).toEqual(text("The end!", true));
  });
});

describe("missing and hold", () => {
  it("names the summarized messages in seq order and takes fetched copies by the rules", () => {
    let ms = foldMessages(noMessages, init(false,
      summary(msg("a", 3, 9, "streaming", text("A", true))),
      summary(msg("b", 5, 5, "complete", text("B", false))),
      msg("c", 7, 7, "complete", text("c", false))));
    expect(missingMessages(ms)).toEqual(["a", "b"]);
    const e = (f: Frame) => (f as Extract<Frame, { type: "event" }>).event;
    ms = applyEventToMessages(ms, e(ev(10, "chunk", chunk("a", " lost"))));
    // a, read over HTTP once the server was at seq 12: it has what chunk 10 added.
    let next = hold(ms, msg("a", 3, 12, "streaming", text("A lost and found", true)));
    expect(next).not.toBe(ms);
    ms = next;
    ms = applyEventToMessages(ms, e(ev(12, "chunk", chunk("a", " twice"))));
    ms = applyEventToMessages(ms, e(ev(13, "chunk", chunk("a", "!"))));
    next = hold(ms, msg("b", 5, 5, "complete", text("B whole", false)));
    expect(next).not.toBe(ms);
    ms = next;
    for (const m of [
      msg("ghost", 8, 8, "complete", text("removed", false)), // not held
      msg("a", 3, 11, "streaming", text("older", true)), // older than held
      summary(msg("c", 7, 8, "complete", text("summary", false))), // a summary
    ]) {
      expect(hold(ms, m), `${m.id} as of ${m.updatedSeq}`).toBe(ms);
    }
    expect(missingMessages(ms)).toEqual([]);
    expect(show(ms)).toBe(`a:streaming:"A lost and found!"[text~] b:complete:"B whole"[text] c:complete:"c"[text]`);
  });
});

// Text streamed with no message (v1 conversations): rule 9 of the fold, a
// port of client/fold_test.go's TestFoldStreamingTextOfV1.

/** The event of f as one of agent, in turn 2 of exchange p1. */
function by(agentId: string, f: Frame): Frame {
  const e = (f as Extract<Frame, { type: "event" }>).event;
  return { type: "event", event: { ...e, agentId, turn: 2, turnId: "p1" } };
}

function row(id: string, seq: number, agentId: string, finality: Message["finality"]): Message {
  return { ...msg(id, seq, seq, "streaming"), agentId, finality };
}

/** The streaming texts as "agent@seq-updated:content", as fold_test.go's showStreaming. */
function showStreaming(ts: StreamingTexts): string {
  return ts.map((t) => `${t.agentId}@${t.seq}-${t.updatedSeq}:${JSON.stringify(t.content)}`).join(" ");
}

const start: Frame[] = [
  init(false),
  by("alice", ev(5, "chunk", chunk("", "Let me "))),
  by("bob", ev(6, "chunk", chunk("", "Hm"))),
  by("alice", ev(7, "chunk", chunk("", "look."))),
];
const then = (...f: Frame[]): Frame[] => [...start, ...f];
const both = `alice@5-7:"Let me look." bob@6-6:"Hm"`;

const streamingCases: [string, Frame[], string][] = [
  ["chunks that name no message grow their agent's text", start, both],
  ["a chunk already folded changes nothing", then(by("alice", ev(7, "chunk", chunk("", "look.")))), both],
  ["the agent's next message holds the text", then(by("alice", ev(8, "message", row("r1", 8, "alice", "none")))), `bob@6-6:"Hm"`],
  ["another agent's message does not", then(by("carol", ev(8, "message", row("r1", 8, "carol", "none")))), both],
  ["a chunk of a message is the message's", then(by("alice", ev(8, "chunk", chunk("r0", "x")))), both],
  ["an update that keeps the turn open does not end it", then(by("alice", ev(8, "message.updated", row("r0", 4, "alice", "none")))), both],
  ["an update that closes the agent's turn ends it", then(by("alice", ev(8, "message.updated", row("r0", 4, "alice", "turn")))), `bob@6-6:"Hm"`],
  ["a message that closes the conversation ends every one", then(by("carol", ev(8, "message", row("r1", 8, "carol", "conversation")))), ``],
  ["the end of the agent's prompt ends it", then(by("bob", ev(8, "prompt.completed", { id: "p1" }))), `alice@5-7:"Let me look."`],
  ["so does a prompt canceled", then(by("alice", ev(8, "prompt.canceled", { id: "p1", reason: "aborted" }))), `bob@6-6:"Hm"`],
  ["and one put back in the queue", then(by("alice", ev(8, "prompt.requeued", { id: "p1" }))), `bob@6-6:"Hm"`],
  ["and a turn reset", then(by("bob", ev(8, "turn.reset", { turn: 2 }))), `alice@5-7:"Let me look."`],
  ["an event before the text ends nothing", then(by("alice", ev(7, "prompt.completed", { id: "p1" }))), both],
  ["a revert ends every one", then(by("human", ev(8, "messages.removed", { messageIds: ["p1"] }))), ``],
  ["a snapshot ends every one", then(init(false)), ``],
  ["and holds its own, which go on",
    then(withTexts(init(false), { agentId: "carol", turn: 3, turnId: "p2", seq: 9, updatedSeq: 10, content: "So " }),
      by("carol", ev(10, "chunk", chunk("", "So "))), by("carol", ev(11, "chunk", chunk("", "far")))),
    `carol@9-11:"So far"`],
  ["a resumed stream keeps them", then(init(true), by("alice", ev(8, "chunk", chunk("", " Now.")))), `alice@5-8:"Let me look. Now." bob@6-6:"Hm"`],
  ["text after the row starts anew",
    then(by("alice", ev(8, "message", row("r1", 8, "alice", "none"))), by("alice", ev(9, "chunk", chunk("", "More")))),
    `bob@6-6:"Hm" alice@9-9:"More"`],
];

describe("streaming text with no message (v1)", () => {
  it.each(streamingCases)("%s", (_name, frames, want) => {
    let ts = noStreamingTexts;
    let s = emptyState;
    for (const f of frames) {
      ts = foldStreamingTexts(ts, f);
      s = foldFrame(s, f);
    }
    expect(showStreaming(ts)).toBe(want);
    expect(s.streaming).toEqual(ts); // the state folds it the same
    for (const m of s.messages) expect(m.content, `message ${m.id}`).toBe(""); // no message took the text
  });

  it("carries its turn and exchange, and returns what it was given when nothing changed", () => {
    let ts = noStreamingTexts;
    for (const f of start) ts = foldStreamingTexts(ts, f);
    expect(ts[0]).toEqual({ agentId: "alice", turn: 2, turnId: "p1", seq: 5, updatedSeq: 7, content: "Let me look." });
    const e = (f: Frame) => (f as Extract<Frame, { type: "event" }>).event;
    expect(applyEventToStreamingTexts(ts, e(by("alice", ev(7, "chunk", chunk("", "again")))))).toBe(ts);
    expect(applyEventToStreamingTexts(ts, e(by("carol", ev(8, "message", row("r1", 8, "carol", "none")))))).toBe(ts);
    expect(applyEventToStreamingTexts(ts, e(ev(8, "turn.claimed", {})))).toBe(ts);
    const next = applyEventToStreamingTexts(ts, e(by("alice", ev(8, "chunk", chunk("", "!")))));
    expect(next[1]).toBe(ts[1]); // bob's did not change
    const f = new ConversationFold();
    for (const fr of start) f.apply(fr);
    expect(f.streaming).toEqual(ts);
  });
});
