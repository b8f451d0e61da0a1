// The text agents stream in a v1 conversation before a message holds it
// (the client's state.streaming), shown while it streams as messages of
// their own: each is put among the messages by seq, as a streaming
// assistant message of its agent whose id no real message can have (real
// ids are made of A-Z a-z 0-9 . _ : -). The row that holds the text takes
// its place when it comes.

import type { Message, StreamingText } from "@parleyhq/client";

const PREFIX = "~streaming~";

/** Whether m is a streaming text shown as a message (it cannot be reverted, replied to or read over HTTP). */
export function isStreamingText(m: Message): boolean {
  return m.id.startsWith(PREFIX);
}

// One message per text: a text that did not change gives the same message, so its row is not drawn again.
const made = new WeakMap<StreamingText, Message>();

function asMessage(t: StreamingText, conversationId: string): Message {
  let m = made.get(t);
  if (!m) {
    m = {
      id: PREFIX + t.agentId,
      conversationId,
      seq: t.seq,
      updatedSeq: t.updatedSeq,
      role: "assistant",
      agentId: t.agentId,
      parts: [{ type: "text", text: t.content, streaming: true }],
      content: t.content,
      status: "streaming",
      turn: t.turn,
      turnId: t.turnId,
      depth: 0,
      finality: "none",
      createdAt: null,
      updatedAt: null,
    };
    made.set(t, m);
  }
  return m;
}

/** The messages with the streaming texts put among them by seq; the very messages when there is none. */
export function withStreaming(messages: readonly Message[], texts: readonly StreamingText[], conversationId: string): readonly Message[] {
  if (texts.length === 0) return messages;
  const out = [...messages];
  for (const t of texts) {
    let at = out.length;
    while (at > 0 && out[at - 1]!.seq > t.seq) at--;
    out.splice(at, 0, asMessage(t, conversationId));
  }
  return out;
}
