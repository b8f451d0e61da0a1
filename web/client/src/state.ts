// The whole of what a client shows of a conversation, folded from its
// stream: the messages (fold.ts), the conversation, the position, the head
// and guidance, and the prompt queue. Pure functions over plain data, with
// immutable updates: what did not change keeps its identity.

import * as fold from "./fold.js";
import type { Messages } from "./fold.js";
import { applyEventToStreamingTexts, noStreamingTexts, snapshotTexts, type StreamingTexts } from "./streamed.js";
import type {
  Conversation,
  ConversationUpdateData,
  Frame,
  Guidance,
  Head,
  InputRequestPart,
  Message,
  PendingInput,
  ParleyEvent,
  Position,
  PromptEventData,
  QueuedPrompt,
  View,
} from "./types.js";

/** The prompt queue as the client knows it. */
export interface PromptQueue {
  /**
   * False until the client knows the queue: after a snapshot (the init of
   * a stream joined without a position) it must read it
   * (`ParleyClient.promptQueue`, then {@link withQueue}); a stream read
   * from the log's start knows it from `conversation.created` on.
   */
  readonly known: boolean;
  /** The seq the queue is exact as of: prompt events at or before it are in it already. */
  readonly asOf: number;
  /** The prompts, the one being answered first, then the waiting ones in the order they go. */
  readonly prompts: readonly QueuedPrompt[];
  /**
   * While the queue is not known: the prompt events folded meanwhile (at
   * most {@link maxPendingPromptEvents}, the newest), which {@link withQueue}
   * folds again into the queue read over HTTP, past the seq it is exact as of.
   */
  readonly pending?: readonly ParleyEvent[];
  /** The seq of the newest pending event let go to keep the bound (0: none). */
  readonly droppedThrough?: number;
}

/** Bounds the prompt events kept while the queue is not known. */
const maxPendingPromptEvents = 1000;

/** What a client shows of a conversation. */
export interface ConversationState {
  readonly conversation: Conversation | null;
  /** The position of the last frame folded (an init's, or an event's). */
  readonly position: Position | null;
  /** The messages, in seq order. */
  readonly messages: Messages;
  /**
   * The text agents stream in a v1 conversation before a message holds it
   * (chunks that name no message), one per agent, in the order they
   * started: show each as its agent's answer so far (streamed.ts).
   */
  readonly streaming: StreamingTexts;
  /**
   * The head as the last init or view had it (as of `head.lastSeq`). Events
   * after it may have changed it: then `headStale` is true, and a client
   * that shows it reads the view again (`ParleyClient.conversation`, then
   * {@link withView}).
   */
  readonly head: Head | null;
  readonly headStale: boolean;
  /** The seq of the last event folded that may change the head. */
  readonly headEventSeq: number;
  /** Who should act next (null: nobody, the conversation is closed, or not known yet). */
  readonly guidance: Guidance | null;
  /** The seq the guidance is as of; an older guidance frame is ignored. */
  readonly guidanceSeq: number;
  readonly queue: PromptQueue;
}

const unknownQueue: PromptQueue = Object.freeze({ known: false, asOf: 0, prompts: Object.freeze([]) });

/** The state before any frame. */
export const emptyState: ConversationState = Object.freeze({
  conversation: null,
  position: null,
  messages: fold.noMessages,
  streaming: noStreamingTexts,
  head: null,
  headStale: false,
  headEventSeq: 0,
  guidance: null,
  guidanceSeq: 0,
  queue: unknownQueue,
});

const noPending: readonly PendingInput[] = Object.freeze([]);

/** Event types that change nothing of the head but its lastSeq. */
const headless = new Set<string>([
  "chunk",
  "part.updated",
  "compacted",
  "conversation.created",
  "conversation.updated",
  "task.run",
  "prompt.queued",
  "prompt.dispatched",
  "prompt.aborted",
  "prompt.completed",
  "prompt.canceled",
  "prompt.requeued",
  "prompt.promoted",
  "input.answered",
  "input.acked",
]);

/**
 * Folds one frame of a stream into the state (see {@link foldMessages}
 * for the messages):
 *
 * - init: the conversation, position, head and guidance are the init's; a
 *   snapshot (`recovered: false`) replaces the messages and the streaming
 *   texts with its own and leaves the prompt queue unknown; a recovered
 *   init keeps all three.
 * - guidance: taken unless older than the guidance held.
 * - event: the position moves to it; the messages, the streaming texts and
 *   the prompt queue fold it; `conversation.created` and
 *   `conversation.updated` change the conversation ({@link applyConversationUpdate}); a message that closes the conversation ends the guidance; an event
 *   after the head that may change it makes the head stale; the head's
 *   pending input requests follow the requests opened and ended after it
 *   ({@link applyPendingInput}).
 */
export function foldFrame(s: ConversationState, frame: Frame): ConversationState {
  switch (frame.type) {
    case "init": {
      const { init } = frame;
      return {
        conversation: init.conversation,
        position: init.position,
        messages: fold.foldMessages(s.messages, frame),
        streaming: init.recovered ? s.streaming : snapshotTexts(init),
        head: init.head,
        headStale: false,
        headEventSeq: init.recovered ? s.headEventSeq : 0,
        guidance: init.guidance,
        guidanceSeq: init.head.lastSeq,
        queue: init.recovered ? s.queue : unknownQueue,
      };
    }
    case "guidance":
      if (frame.guidance.afterSeq < s.guidanceSeq) return s;
      return { ...s, guidance: frame.guidance, guidanceSeq: frame.guidance.afterSeq };
    case "event":
      return applyEvent(s, frame.event);
  }
}

/** Folds one event of the log into the state (as a stream or `GET …/events` carries it). */
export function applyEvent(s: ConversationState, e: ParleyEvent): ConversationState {
  const next: { -readonly [K in keyof ConversationState]: ConversationState[K] } = {
    ...s,
    position: { seq: e.seq, epoch: s.position?.epoch ?? s.conversation?.epoch ?? "" },
    messages: fold.applyEvent(s.messages, e),
    streaming: applyEventToStreamingTexts(s.streaming, e),
  };
  if (s.head !== null && e.seq > s.head.lastSeq) {
    const held = s.head.pendingInputs ?? noPending;
    const pending = applyPendingInput(held, e);
    if (pending !== held) {
      const { pendingInputs: _p, ...head } = s.head;
      next.head = pending.length > 0 ? { ...head, pendingInputs: [...pending] } : head;
    }
  }
  if (e.type === "conversation.created") {
    next.conversation = e.data;
    next.queue = { known: true, asOf: e.seq, prompts: [] };
  } else if (e.type === "conversation.updated") {
    next.conversation = applyConversationUpdate(s.conversation, e.data, e.conversationId);
  } else if (e.type.startsWith("prompt.")) {
    next.queue = applyPrompt(s.queue, e);
  }
  if ((e.type === "message" || e.type === "message.updated") && e.data.finality === "conversation" && e.seq >= s.guidanceSeq) {
    next.guidance = null;
    next.guidanceSeq = e.seq;
  }
  if (!headless.has(e.type) && e.seq > next.headEventSeq) {
    next.headEventSeq = e.seq;
    next.headStale = s.head === null || e.seq > s.head.lastSeq;
  }
  return next;
}

/**
 * Folds the data of a `conversation.updated` event into a conversation:
 * its title, metadata, participants and members become the event's (a
 * title "" and metadata null are left out, as the server leaves them out;
 * so are no members); the rest stays. With no conversation held yet, the
 * result has only the conversation's id and those fields until an init or
 * `conversation.created` tells the rest.
 */
export function applyConversationUpdate(c: Conversation | null, u: ConversationUpdateData, id = c?.id ?? ""): Conversation {
  const unknown: Conversation = { id, epoch: "", participants: [], turnPolicy: "round-robin", messageFormat: "v2", createdAt: null };
  const { title: _t, metadata: _m, members: _ms, ...rest } = c ?? unknown;
  const out: Conversation = { ...rest, participants: Array.isArray(u.participants) ? [...u.participants] : rest.participants };
  if (u.title) out.title = u.title;
  if (u.metadata !== null && u.metadata !== undefined) out.metadata = u.metadata;
  if (Array.isArray(u.members) && u.members.length > 0) out.members = [...u.members];
  return out;
}

/**
 * Folds an event into a head's list of pending input requests: a
 * `part.updated` that opens a request adds it (at the end: the list is
 * oldest first) unless it is listed; an `input.answered` removes the
 * request it ends. Any other event returns the very list it was given.
 */
export function applyPendingInput(list: readonly PendingInput[], e: ParleyEvent): readonly PendingInput[] {
  if (e.type === "part.updated") {
    const p = e.data.part as InputRequestPart;
    if (p.type !== "input-request" || (p.status && p.status !== "pending")) return list;
    if (list.some((x) => x.requestId === p.requestId)) return list;
    const add: PendingInput = { requestId: p.requestId, messageId: e.data.messageId, agentId: e.agentId ?? "", kind: p.kind };
    if (p.title) add.title = p.title;
    if (p.expiresAt) add.expiresAt = p.expiresAt;
    return [...list, add];
  }
  if (e.type === "input.answered") {
    const out = list.filter((x) => x.requestId !== e.data.requestId);
    return out.length === list.length ? list : out;
  }
  return list;
}

/**
 * Takes a view read over HTTP (`ParleyClient.conversation`): its head and
 * guidance replace those held unless they are older. The head stays stale
 * if an event folded since may have changed it.
 */
export function withView(s: ConversationState, v: View): ConversationState {
  let next = s;
  if (s.head === null || v.head.lastSeq >= s.head.lastSeq) {
    next = { ...next, conversation: v.conversation, head: v.head, headStale: next.headEventSeq > v.head.lastSeq };
  }
  if (v.head.lastSeq >= s.guidanceSeq) {
    next = { ...next, guidance: v.guidance, guidanceSeq: v.head.lastSeq };
  }
  return next;
}

/**
 * Takes the prompt queue read over HTTP, exact as of seq `asOf`
 * (`ParleyClient.promptQueue` says as of when), unless the queue held is
 * known as of a later seq. The prompt events after `asOf` continue it:
 * those folded while it was read, and those to come.
 */
export function withQueue(s: ConversationState, prompts: readonly QueuedPrompt[], asOf: number): ConversationState {
  if (s.queue.known) {
    return s.queue.asOf > asOf ? s : { ...s, queue: { known: true, asOf, prompts } };
  }
  // Prompt events were folded while the queue was read: those past the
  // read's seq go on top of it. If one of those was let go, the read is
  // too old to finish: the queue stays unknown, to be read again.
  if ((s.queue.droppedThrough ?? 0) > asOf) return s;
  let q: PromptQueue = { known: true, asOf, prompts };
  for (const e of s.queue.pending ?? []) q = applyPrompt(q, e);
  return { ...s, queue: q };
}

/** The ids of the messages held summarized, in seq order: read each and give it to {@link holdMessage}. */
export function missing(s: ConversationState): string[] {
  return fold.missing(s.messages);
}

/** Puts a message read over HTTP in place of the copy held, by the rule of {@link fold.hold}. */
export function holdMessage(s: ConversationState, m: Message): ConversationState {
  const messages = fold.hold(s.messages, m);
  return messages === s.messages ? s : { ...s, messages };
}

/**
 * Folds a prompt event into the queue, as the server keeps its queue, and
 * keeps each prompt's text: `prompt.queued` adds a prompt (a steer before
 * every waiting one) or merges a collect prompt's text into the one still
 * collecting; `prompt.dispatched` marks it answered by its runner;
 * `prompt.aborted` marks it aborted; `prompt.completed` and
 * `prompt.canceled` remove it; `prompt.requeued` and `prompt.promoted` move
 * it before every waiting prompt. An event at or before `asOf` is in the
 * queue already and changes nothing.
 */
export function applyPrompt(q: PromptQueue, e: ParleyEvent): PromptQueue {
  if (e.seq <= q.asOf || !e.type.startsWith("prompt.")) return q;
  const p = e.data as PromptEventData;
  const ps = [...q.prompts];
  const i = ps.findIndex((x) => x.id === p.id || (p.into !== undefined && p.into !== "" && x.id === p.into));
  const type = e.type;
  switch (type) {
    case "prompt.queued": {
      const content = p.content ?? "";
      if (p.into && i >= 0) {
        const x = ps[i]!;
        ps[i] = {
          ...x,
          parts: [...x.parts, e.seq],
          until: p.until ?? null,
          bytes: (x.bytes ?? 0) + 2 + utf8Length(content),
          ...(x.content !== undefined ? { content: x.content + "\n\n" + content } : {}),
        };
        break;
      }
      const np: QueuedPrompt = { id: p.id, mode: p.mode ?? "followup", agentId: e.agentId ?? "", parts: [e.seq], until: p.until ?? null, content };
      if (p.to) np.to = p.to;
      if (p.channel) np.channel = p.channel;
      if (p.turnId) np.turnId = p.turnId;
      if (content !== "") np.bytes = utf8Length(content);
      if (p.mode === "steer") ps.splice(firstWaiting(ps), 0, np);
      else ps.push(np);
      break;
    }
    case "prompt.dispatched":
      if (i >= 0) ps[i] = { ...ps[i]!, ...(p.runner ? { runner: p.runner } : {}), written: true };
      break;
    case "prompt.aborted":
      if (i >= 0) ps[i] = { ...ps[i]!, aborted: true };
      break;
    case "prompt.completed":
    case "prompt.canceled":
      if (i >= 0) ps.splice(i, 1);
      break;
    case "prompt.requeued":
    case "prompt.promoted":
      if (i >= 0) {
        const { runner: _r, ...x } = ps[i]!;
        ps.splice(i, 1);
        ps.splice(firstWaiting(ps), 0, x);
      }
      break;
    default:
      break;
  }
  if (q.known) return { known: true, asOf: e.seq, prompts: ps };
  const pending = [...(q.pending ?? []), e];
  let droppedThrough = q.droppedThrough ?? 0;
  if (pending.length > maxPendingPromptEvents) droppedThrough = pending.shift()!.seq;
  return { known: false, asOf: e.seq, prompts: ps, pending, droppedThrough };
}

/** The index of the first prompt not being answered. */
function firstWaiting(ps: readonly QueuedPrompt[]): number {
  const i = ps.findIndex((p) => !p.runner);
  return i < 0 ? ps.length : i;
}

/** The length of s in UTF-8, as the server counts a prompt's bytes. */
export function utf8Length(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x80) n += 1;
    else if (c < 0x800) n += 2;
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < s.length) {
      n += 4;
      i++;
    } else n += 3;
  }
  return n;
}
