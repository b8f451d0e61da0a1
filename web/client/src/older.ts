// Older messages read over HTTP (`GET …/messages`), put before the ones the
// stream's snapshot holds. Pure.

import type { ConversationState } from "./state.js";
import type { Message } from "./types.js";

/**
 * The state with the older messages put in front: those with a seq before
 * the first message held that are not held already and were not removed
 * meanwhile (a revert the stream brought after the page was read). Returns
 * s itself when nothing is added.
 */
export function withOlder(s: ConversationState, older: readonly Message[], removed: ReadonlySet<string> = new Set()): ConversationState {
  const first = s.messages[0];
  const before = first?.seq ?? Number.POSITIVE_INFINITY;
  const held = new Set(s.messages.map((m) => m.id));
  const add = older.filter((m) => m.seq < before && !held.has(m.id) && !removed.has(m.id));
  if (add.length === 0) return s;
  add.sort((a, b) => a.seq - b.seq);
  const unique = add.filter((m, i) => i === 0 || add[i - 1]!.id !== m.id);
  return { ...s, messages: [...unique, ...s.messages] };
}

/**
 * The next span of seqs to read before the first message held, from how
 * many messages the last span gave: a span that gave few grows (the log
 * between messages is mostly text deltas), one that gave many shrinks, so
 * that a page holds about `want` messages.
 */
export function nextSpan(span: number, got: number, want = 200): number {
  if (got <= 0) return Math.min(span * 4, 1 << 30);
  const next = Math.round((span * want) / got);
  return Math.max(256, Math.min(next, span * 4, 1 << 30));
}
