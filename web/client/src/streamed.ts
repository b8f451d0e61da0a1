// The text an agent streams in a conversation made with messageFormat v1
// before a message holds it: a runner of the first protocol streams its
// answer as chunk events that name no message (messageId ""), then sends
// the text again as a message row. Rule 9 of the fold (docs/stream.md), the
// same as the Go SDK's Fold.Streaming, as pure functions over plain data:
// each returns the very array it was given when nothing changed.

import { isRecord } from "./errors.js";
import type { Frame, Init, ParleyEvent, StreamingText } from "./types.js";

export type { StreamingText } from "./types.js";

/** The streaming texts, at most one per agent, in the order they started. */
export type StreamingTexts = readonly StreamingText[];

/** No streaming text. */
export const noStreamingTexts: StreamingTexts = Object.freeze([]);

/**
 * The events of an agent after which the text it streamed with no message
 * is no longer shown: its turn restarted or ended, or the prompt it answered
 * ended (completed, canceled, or put back in the queue when its runner left).
 */
const endsStreaming = new Set<string>(["turn.reset", "turn.aborted", "prompt.completed", "prompt.canceled", "prompt.requeued"]);

/** Folds one frame of a stream in: a snapshot (`recovered: false`) holds its own; a recovered init keeps them. */
export function foldStreamingTexts(ts: StreamingTexts, frame: Frame): StreamingTexts {
  if (frame.type === "init") return frame.init.recovered ? ts : snapshotTexts(frame.init);
  if (frame.type === "event") return applyEventToStreamingTexts(ts, frame.event);
  return ts;
}

/** The streaming texts of a snapshot, as the fold holds them. */
export function snapshotTexts(init: Init): StreamingTexts {
  return init.streaming?.length ? init.streaming : noStreamingTexts;
}

/**
 * Folds one event of the log in:
 *
 * - a `chunk` whose `messageId` is "" appends its text to its agent's (the
 *   event's `agentId`), or starts it;
 * - the agent's next `message` (the row that holds the text), a `message` or
 *   `message.updated` of its that closes its turn, its `turn.reset` or
 *   `turn.aborted`, its `prompt.completed`, `prompt.canceled` or
 *   `prompt.requeued` drop the agent's text;
 * - a message that closes the conversation, and `messages.removed` (a
 *   revert), drop every one.
 *
 * An event at or before the seq of a text's last chunk changes nothing of it.
 */
export function applyEventToStreamingTexts(ts: StreamingTexts, e: ParleyEvent): StreamingTexts {
  switch (e.type) {
    case "chunk": {
      const d = e.data as unknown;
      if (!isRecord(d) || d["messageId"] !== "" || typeof d["content"] !== "string") return ts;
      return streamText(ts, e, d["content"]);
    }
    case "message":
    case "message.updated": {
      const m = e.data as unknown;
      if (!isRecord(m)) return ts;
      if (m["finality"] === "conversation") return endTexts(ts, e.seq);
      const agentId = typeof m["agentId"] === "string" ? m["agentId"] : "";
      if (e.type === "message" || m["finality"] === "turn") return endText(ts, agentId, e.seq);
      return ts;
    }
    case "messages.removed":
      return endTexts(ts, e.seq);
    default:
      return endsStreaming.has(e.type) ? endText(ts, e.agentId ?? "", e.seq) : ts;
  }
}

function streamText(ts: StreamingTexts, e: ParleyEvent, content: string): StreamingTexts {
  const agentId = e.agentId ?? "";
  const i = ts.findIndex((t) => t.agentId === agentId);
  if (i < 0) return [...ts, { agentId, turn: e.turn, turnId: e.turnId ?? "", seq: e.seq, updatedSeq: e.seq, content }];
  const t = ts[i]!;
  if (e.seq <= t.updatedSeq) return ts;
  const out = [...ts];
  out[i] = { ...t, content: t.content + content, updatedSeq: e.seq };
  return out;
}

function endText(ts: StreamingTexts, agentId: string, seq: number): StreamingTexts {
  const i = ts.findIndex((t) => t.agentId === agentId);
  if (i < 0 || seq <= ts[i]!.updatedSeq) return ts;
  return [...ts.slice(0, i), ...ts.slice(i + 1)];
}

function endTexts(ts: StreamingTexts, seq: number): StreamingTexts {
  const out = ts.filter((t) => seq <= t.updatedSeq);
  return out.length === ts.length ? ts : out;
}
