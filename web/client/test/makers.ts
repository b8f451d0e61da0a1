// Makers of messages, events and frames, and stand-ins for a stream and
// for animation frames, for the tests that need no server (the web UI's
// unit tests use them too).
import type { Conversation, Frame, Init, Message, ParleyEvent } from "../src/index.js";

/** A complete message of agent a in conversation c, with p's fields. */
export function msg(p: Partial<Message> & { id: string; seq: number }): Message {
  return {
    conversationId: "c",
    role: "assistant",
    agentId: "a",
    parts: [{ type: "text", text: p.content ?? "" }],
    content: "",
    status: "complete",
    turn: 1,
    turnId: p.id,
    depth: 0,
    finality: "none",
    createdAt: "2026-11-22T12:00:00.000Z",
    updatedAt: null,
    ...p,
  };
}

/** Conversation c, with p's fields. */
export function conv(p: Partial<Conversation> = {}): Conversation {
  return { id: "c", epoch: "00000000", participants: ["a", "b"], turnPolicy: "round-robin", messageFormat: "v2", createdAt: null, ...p };
}

/** An event of the log; data as the type holds it. */
export function ev(seq: number, type: string, data: unknown, p: { agentId?: string; turn?: number; turnId?: string } = {}): ParleyEvent {
  return { conversationId: "c", seq, type, turn: p.turn ?? 0, turnId: p.turnId, agentId: p.agentId, finality: "none", ts: null, data } as unknown as ParleyEvent;
}

/** A snapshot's init frame at position, holding messages. */
export function snapshot(position: number, messages: Message[]): Frame {
  const i: Init = {
    recovered: false,
    position: { seq: position, epoch: "e" },
    conversation: conv({ epoch: "e" }),
    head: { lastSeq: position, epoch: "e", lastTurn: 1, openTurn: null, claim: null, closed: false, lastClosedSeq: 0 },
    guidance: null,
    messages,
  };
  return { type: "init", init: i };
}

/** A stand-in for a client's subscribe: a stream whose frames the test pushes. */
export function pushedStream() {
  const frames: Frame[] = [];
  let wake: (() => void) | undefined;
  let closed = false;
  return {
    subscribe: () => ({
      close: () => {
        closed = true;
        wake?.();
      },
      async *[Symbol.asyncIterator]() {
        for (;;) {
          while (frames.length === 0 && !closed) await new Promise<void>((r) => (wake = r));
          if (closed) return;
          yield frames.shift()!;
        }
      },
    }),
    push: (f: Frame) => {
      frames.push(f);
      wake?.();
    },
  };
}

/** A scheduler whose frames run when the test says. */
export function manualFrames() {
  let queued: (() => void)[] = [];
  return {
    schedule: (cb: () => void) => {
      queued.push(cb);
      return () => (queued = queued.filter((x) => x !== cb));
    },
    run() {
      const q = queued;
      queued = [];
      for (const f of q) f();
    },
  };
}
