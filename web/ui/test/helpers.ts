// Makers of messages and events for the unit tests.
import type { Conversation, Message, ParleyEvent } from "@parleyhq/client";

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

export function conv(p: Partial<Conversation> = {}): Conversation {
  return { id: "c", epoch: "00000000", participants: ["a", "b"], turnPolicy: "round-robin", messageFormat: "v2", createdAt: null, ...p };
}

/** An event of the log; data as the type holds it. */
export function ev(seq: number, type: string, data: unknown, p: { agentId?: string; turn?: number; turnId?: string } = {}): ParleyEvent {
  return { conversationId: "c", seq, type, turn: p.turn ?? 0, turnId: p.turnId, agentId: p.agentId, finality: "none", ts: null, data } as unknown as ParleyEvent;
}

/** The `message` event that writes m. */
export function msgEv(m: Message): ParleyEvent {
  return ev(m.seq, "message", m, { agentId: m.agentId, turn: m.turn, turnId: m.turnId });
}
