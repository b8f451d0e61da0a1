// The fold of a stream into messages: the merge rules of docs/stream.md
// ("Folding the stream into messages"), the same as the Go SDK's
// client.Fold, as pure functions over plain data. Every function returns a
// new array when something changed and the very array it was given when
// nothing did, and never changes a message in place: a message that did not
// change keeps its identity, so that a UI compares by reference.

import { isRecord } from "./errors.js";
import type { Frame, InputAnsweredData, InputRequestPart, Message, ParleyEvent, Part, TextPart, ToolCallPart } from "./types.js";

/** The messages a client shows, in seq order. */
export type Messages = readonly Message[];

/** No messages. */
export const noMessages: Messages = Object.freeze([]);

/**
 * Folds one frame of a stream into the messages:
 * an init with `recovered: false` replaces them with the snapshot's; an
 * init with `recovered: true` and a guidance leave them as they are; an
 * event is folded by {@link applyEvent}.
 */
export function foldMessages(ms: Messages, frame: Frame): Messages {
  switch (frame.type) {
    case "init":
      if (frame.init.recovered) return ms;
      return sortBySeq((frame.init.messages ?? []).map(copyOf));
    case "event":
      return applyEvent(ms, frame.event);
    default:
      return ms;
  }
}

/**
 * Folds one event of the log into the messages (as a stream or
 * `GET …/events` carries it):
 *
 * - `message`: hold the message, replacing one with the same id.
 * - `message.updated`: the same (hold it if it was not held: an older
 *   message than the snapshot ended).
 * - `chunk`: if the message is held whole (not summarized) and the event's
 *   seq is after its `updatedSeq`, append the text to its last part when
 *   that is a streaming text part, else add a streaming text part; its
 *   content grows by the text and its `updatedSeq` becomes the event's seq.
 *   Otherwise nothing: the message already has that text, or its copy read
 *   whole will.
 * - `part.updated`: under the same condition, apply the tool-call part
 *   ({@link applyTool}), or the input-request part ({@link applyInputRequest}).
 * - `input.answered`: under the same condition, end the input request it
 *   names ({@link applyInputAnswered}).
 * - `messages.removed`: drop the messages named.
 * - every other event leaves the messages as they are.
 *
 * It throws a TypeError, changing nothing, for an event whose data is not
 * what its type says.
 */
export function applyEvent(ms: Messages, e: ParleyEvent): Messages {
  switch (e.type) {
    case "message":
    case "message.updated":
      if (!isMessage(e.data)) throw badData(e);
      return put(ms, copyOf(e.data));
    case "chunk": {
      const d = e.data as unknown;
      if (!isRecord(d) || typeof d["messageId"] !== "string" || typeof d["content"] !== "string") throw badData(e);
      const i = growing(ms, d["messageId"], e.seq);
      if (i < 0) return ms;
      return replaceAt(ms, i, { ...appendText(ms[i]!, d["content"]), updatedSeq: e.seq });
    }
    case "part.updated": {
      const d = e.data as unknown;
      if (!isRecord(d) || typeof d["messageId"] !== "string" || !isRecord(d["part"])) throw badData(e);
      const p = d["part"];
      if (p["type"] === "input-request") {
        if (typeof p["requestId"] !== "string") throw badData(e);
        const i = growing(ms, d["messageId"], e.seq);
        if (i < 0) return ms;
        return replaceAt(ms, i, { ...applyInputRequest(ms[i]!, p as unknown as InputRequestPart), updatedSeq: e.seq });
      }
      if (typeof p["callId"] !== "string") throw badData(e);
      const i = growing(ms, d["messageId"], e.seq);
      if (i < 0) return ms;
      return replaceAt(ms, i, { ...applyTool(ms[i]!, p as unknown as ToolCallPart), updatedSeq: e.seq });
    }
    case "input.answered": {
      const d = e.data as unknown;
      if (!isRecord(d) || typeof d["messageId"] !== "string" || typeof d["requestId"] !== "string" || typeof d["status"] !== "string") throw badData(e);
      const i = growing(ms, d["messageId"], e.seq);
      if (i < 0) return ms;
      return replaceAt(ms, i, { ...applyInputAnswered(ms[i]!, d as unknown as InputAnsweredData), updatedSeq: e.seq });
    }
    case "messages.removed": {
      const d = e.data as unknown;
      if (!isRecord(d) || !Array.isArray(d["messageIds"])) throw badData(e);
      const gone = new Set(d["messageIds"] as unknown[]);
      const out = ms.filter((m) => !gone.has(m.id));
      return out.length === ms.length ? ms : out;
    }
    default:
      return ms;
  }
}

/**
 * The ids of the messages held summarized (a snapshot leaves out the parts
 * and content of a large message), in seq order: read each with
 * `ParleyClient.message` and give it to {@link hold}.
 */
export function missing(ms: Messages): string[] {
  return ms.filter((m) => m.summarized !== undefined).map((m) => m.id);
}

/**
 * Puts a message read over HTTP in place of the copy held of it, if that
 * copy is summarized, or is older (its `updatedSeq` is lower). A message
 * not held is not added (it was removed meanwhile, or is older than the
 * snapshot); nor is a summarized one. It returns the messages it was given
 * when it did not take m. A streaming message read over HTTP is complete
 * as of its `updatedSeq`, which is at least the seq of every event folded
 * so far, so the chunks after it continue it.
 */
export function hold(ms: Messages, m: Message): Messages {
  const i = indexOf(ms, m.id);
  if (i < 0 || m.summarized !== undefined) return ms;
  const held = ms[i]!;
  const was = held.updatedSeq ?? 0;
  const now = m.updatedSeq ?? 0;
  if (held.summarized === undefined ? now <= was : now < was) return ms;
  return put(ms, copyOf(m));
}

/**
 * Applies a text delta to a message: it extends the last part if that is a
 * streaming text part, and otherwise adds a streaming text part (as after
 * a tool call). Content grows by the delta. (parley.Message.AppendText.)
 */
export function appendText(m: Message, delta: string): Message {
  const parts = m.parts;
  const last = parts[parts.length - 1];
  const next: Part[] =
    last !== undefined && last.type === "text" && last.streaming === true
      ? [...parts.slice(0, -1), { ...last, text: (last.text ?? "") + delta }]
      : [...parts, { type: "text", text: delta, streaming: true }];
  return { ...m, parts: next, content: m.content + delta };
}

/**
 * Applies a change of a tool call to a message: p names the call by
 * `callId`. If the message has that call, its status becomes p's and its
 * tool name, args, result and error become p's where p sets them;
 * otherwise p is added as a new part, which ends every streaming text part,
 * so that text after the tool starts a new part.
 * (parley.Message.ApplyTool.)
 */
export function applyTool(m: Message, p: ToolCallPart): Message {
  const i = m.parts.findIndex((q) => q.type === "tool-call" && q.callId === p.callId);
  if (i >= 0) {
    const q = { ...(m.parts[i] as ToolCallPart) };
    if (p.status) q.status = p.status;
    if (p.toolName) q.toolName = p.toolName;
    if (p.args !== undefined) q.args = p.args;
    if (p.result !== undefined) q.result = p.result;
    if (p.error) q.error = p.error;
    const parts = [...m.parts];
    parts[i] = q;
    return { ...m, parts };
  }
  const parts: Part[] = m.parts.map((q) => (q.type === "text" && q.streaming !== undefined ? endText(q) : q));
  const { streaming: _ignored, ...rest } = p as ToolCallPart & { streaming?: boolean };
  parts.push({ ...rest, type: "tool-call" });
  return { ...m, parts };
}

/**
 * Applies an input request to a message: p names it by `requestId`. If the
 * message has that request, p replaces it (a request that has ended stays
 * ended: a late copy of it pending changes nothing); otherwise p is added
 * as a new part, which ends every streaming text part, as a tool call
 * does. `awaitingInput` is then recomputed. (parley.Message.ApplyPart.)
 */
export function applyInputRequest(m: Message, p: InputRequestPart): Message {
  const i = m.parts.findIndex((q) => q.type === "input-request" && q.requestId === p.requestId);
  let parts: Part[];
  if (i >= 0) {
    const q = m.parts[i] as InputRequestPart;
    if (q.status !== "pending" && p.status === "pending") return m;
    parts = [...m.parts];
    parts[i] = { ...q, ...p, type: "input-request" };
  } else {
    parts = m.parts.map((q) => (q.type === "text" && q.streaming !== undefined ? endText(q) : q));
    parts.push({ ...p, type: "input-request", status: p.status || "pending" });
  }
  return withAwaiting({ ...m, parts });
}

/**
 * Ends an input request of a message as an `input.answered` event says:
 * its status, answer, answerer, time and reason become the event's; then
 * `awaitingInput` is recomputed. A message without that request, or one
 * where it has ended already the same way, is returned as it is.
 * (parley.Message.ApplyInputAnswered.)
 */
export function applyInputAnswered(m: Message, d: InputAnsweredData): Message {
  const i = m.parts.findIndex((q) => q.type === "input-request" && q.requestId === d.requestId);
  if (i < 0) return m;
  const q = m.parts[i] as InputRequestPart;
  if (q.status === d.status && q.status !== "pending") return m;
  const { answer: _a, answeredBy: _b, answeredAt: _t, reason: _r, ...rest } = q;
  const next: InputRequestPart = { ...rest, status: d.status };
  if (d.answer !== undefined) next.answer = d.answer;
  if (d.answeredBy) next.answeredBy = d.answeredBy;
  if (d.answeredAt) next.answeredAt = d.answeredAt;
  if (d.reason) next.reason = d.reason;
  const parts = [...m.parts];
  parts[i] = next;
  return withAwaiting({ ...m, parts });
}

/** The input requests of a message still pending. */
export function pendingRequests(m: Message): InputRequestPart[] {
  return m.parts.filter((p): p is InputRequestPart => p.type === "input-request" && p.status === "pending");
}

/** m with `awaitingInput` set while it has a pending input request, and left out otherwise. */
function withAwaiting(m: Message): Message {
  const { awaitingInput: _w, ...rest } = m;
  return pendingRequests(m).length > 0 ? { ...rest, awaitingInput: true } : rest;
}

/** A copy of a summarized message that holds no text, whatever it came with. */
export function summarize(m: Message, bytes: number): Message {
  const { metadata: _m, legacy: _l, ...rest } = m;
  return { ...rest, parts: [], content: "", summarized: { bytes } };
}

function endText(p: TextPart): TextPart {
  const { streaming: _ignored, ...rest } = p;
  return rest;
}

/** The index of the message an event at seq adds to, if it is held whole and not yet as of seq; -1 otherwise. */
function growing(ms: Messages, id: string, seq: number): number {
  const i = indexOf(ms, id);
  if (i < 0) return -1;
  const m = ms[i]!;
  return m.summarized === undefined && seq > (m.updatedSeq ?? 0) ? i : -1;
}

/** The index of the message with that id; searched from the newest, where streaming messages are. */
export function indexOf(ms: Messages, id: string): number {
  for (let i = ms.length - 1; i >= 0; i--) if (ms[i]!.id === id) return i;
  return -1;
}

/** Holds m, replacing any message with its id, in seq order. */
function put(ms: Messages, m: Message): Messages {
  const i = indexOf(ms, m.id);
  if (i >= 0 && ms[i]!.seq === m.seq) return replaceAt(ms, i, m);
  const out = i >= 0 ? [...ms.slice(0, i), ...ms.slice(i + 1)] : [...ms];
  let at = out.length;
  while (at > 0 && out[at - 1]!.seq > m.seq) at--;
  out.splice(at, 0, m);
  return out;
}

function replaceAt(ms: Messages, i: number, m: Message): Messages {
  const out = [...ms];
  out[i] = m;
  return out;
}

function sortBySeq(ms: Message[]): Messages {
  return ms.sort((a, b) => a.seq - b.seq);
}

/** The copy the fold holds of a message it is given: its own parts, and no text if it is a summary. */
function copyOf(m: Message): Message {
  if (m.summarized !== undefined) return summarize(m, m.summarized.bytes);
  return { ...m, parts: (m.parts ?? []).map((p) => ({ ...p })) };
}

function isMessage(d: unknown): d is Message {
  return isRecord(d) && typeof d["id"] === "string" && typeof d["seq"] === "number";
}

function badData(e: ParleyEvent): TypeError {
  return new TypeError(`event ${e.seq} (${e.type}): its data is not what a ${e.type} event holds`);
}
