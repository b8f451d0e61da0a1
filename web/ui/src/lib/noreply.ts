// The `[in-memory, no reply]` mark, by the rule of the Markdown export
// (docs/export.md): an incoming message (one that was delivered to an agent
// and replies to nothing) that no message names in `replyTo`. A message
// still streaming is never marked.
//
// Who a message was delivered to is what the export reads from the log:
// the runner a prompt was dispatched to; else, for a message that closed
// its turn, whom the server told to act next; else, for an imported legacy
// row, the agents whose memory held it. The page knows the dispatches from
// the log's events it has read; for the rest it takes the next agent as the
// closing message and the turn policy name it (a claim or the prompt queue
// may have named another, but never nobody where this names somebody).

import type { Conversation, Message } from "@parleyhq/client";

/** The mark's text, as in the export. */
export const NO_REPLY = "[in-memory, no reply]";

/**
 * The agents message m was delivered to (never its author): see the file's
 * comment. `dispatched` maps a prompt's id to the runner it went to.
 */
export function recipients(m: Message, conversation: Conversation | null, dispatched?: ReadonlyMap<string, string>): string[] {
  const author = m.agentId;
  if (m.legacy) return (m.legacy.seenBy ?? []).filter((a) => a !== author);
  const runner = dispatched?.get(m.id);
  if (runner) return runner === author ? [] : [runner];
  if (m.finality === "none") return [];
  const participants = conversation?.participants ?? [];
  let named = m.next ?? "";
  if (named === "" && (conversation?.turnPolicy ?? "round-robin") === "round-robin" && participants.length > 0) {
    named = participants[(participants.indexOf(author) + 1) % participants.length]!;
  }
  const to = named !== "" ? [named] : [...participants].sort();
  return to.filter((a) => a !== author);
}

/**
 * The ids of the messages to mark `[in-memory, no reply]`: messages that
 * are not tool or system messages, reply to nothing, were delivered (they
 * have recipients), are not streaming, and that no message replies to.
 * Replies come after what they answer, so the messages held, which are the
 * newest ones, know every reply to any of them. A legacy message that no
 * reply names counts as answered when one of its recipients wrote an
 * assistant message after it (the export's timestamp heuristic).
 */
export function noReplyIds(messages: readonly Message[], conversation: Conversation | null, dispatched?: ReadonlyMap<string, string>): Set<string> {
  const answered = new Set<string>();
  const lastAnswer = new Map<string, string>();
  for (const m of messages) {
    if (m.replyTo) answered.add(m.replyTo);
    if (m.role === "assistant" && m.createdAt && (lastAnswer.get(m.agentId) ?? "") < m.createdAt) lastAnswer.set(m.agentId, m.createdAt);
  }
  const out = new Set<string>();
  for (const m of messages) {
    if (m.role === "tool" || m.role === "system" || m.replyTo || m.status === "streaming" || answered.has(m.id)) continue;
    const to = recipients(m, conversation, dispatched);
    if (to.length === 0) continue;
    if (m.legacy && to.some((a) => (lastAnswer.get(a) ?? "") > (m.createdAt ?? ""))) continue;
    out.add(m.id);
  }
  return out;
}
