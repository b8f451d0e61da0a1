// The rows the message list shows, made from the messages (in seq order):
// messages grouped by exchange (turnId), each exchange collapsible, with a
// header per turn, and the messages of workers delegated into a turn nested
// under the turn of the agent that delegated. Pure: the same messages give
// the same rows, with keys that stay the same while the messages do.

import type { Message } from "@parleyhq/client";

/** The header of a run of messages of one exchange. */
export interface ExchangeRow {
  kind: "exchange";
  key: string;
  turnId: string;
  /** The run's first message (the prompt that started the exchange, when it is held). */
  first: Message;
  /** How many messages the run holds. */
  count: number;
  collapsed: boolean;
}

/** The header of a turn within an exchange. */
export interface TurnRow {
  kind: "turn";
  key: string;
  turn: number;
  turnId: string;
  /** The agent that holds the turn. */
  owner: string;
  /** The other agents that wrote into it (delegated workers). */
  delegates: string[];
}

/** A message. */
export interface MessageRow {
  kind: "message";
  key: string;
  message: Message;
  /** Written by a worker delegated into the turn, not by the turn's owner. */
  nested: boolean;
  /** The owner of the message's turn. */
  owner: string;
}

/** One row of the message list. */
export type Row = ExchangeRow | TurnRow | MessageRow;

/** Options of {@link groupRows}. */
export interface GroupOptions {
  /** The exchanges (turnIds) shown collapsed: only their header. */
  collapsed?: ReadonlySet<string>;
  /** The owner of each turn, where the log says it (the first agent that wrote in it). */
  owners?: ReadonlyMap<number, string>;
}

/**
 * The rows of the list: for each run of consecutive messages with the same
 * turnId an exchange header, then (unless that exchange is collapsed) for
 * each turn in the run a turn header and the turn's messages. A turn's owner
 * is the one `owners` names, else the author of its first message that is
 * not a user message, else of its first message; a message by another agent
 * that is not a user message is nested (a delegated worker's).
 */
export function groupRows(messages: readonly Message[], opts: GroupOptions = {}): Row[] {
  const collapsed = opts.collapsed ?? new Set<string>();
  const rows: Row[] = [];
  let i = 0;
  while (i < messages.length) {
    const first = messages[i]!;
    const turnId = first.turnId || first.id;
    let end = i + 1;
    while (end < messages.length && (messages[end]!.turnId || messages[end]!.id) === turnId) end++;
    const isCollapsed = collapsed.has(turnId);
    rows.push({ kind: "exchange", key: "x:" + first.id, turnId, first, count: end - i, collapsed: isCollapsed });
    if (!isCollapsed) {
      let j = i;
      while (j < end) {
        const turn = messages[j]!.turn;
        let k = j + 1;
        while (k < end && messages[k]!.turn === turn) k++;
        const segment = messages.slice(j, k);
        const owner = opts.owners?.get(turn) ?? ownerOf(segment);
        const delegates: string[] = [];
        for (const m of segment) {
          if (m.agentId !== owner && m.role !== "user" && !delegates.includes(m.agentId)) delegates.push(m.agentId);
        }
        rows.push({ kind: "turn", key: "t:" + segment[0]!.id, turn, turnId, owner, delegates });
        for (const m of segment) {
          rows.push({ kind: "message", key: m.id, message: m, nested: turn > 0 && m.agentId !== owner && m.role !== "user", owner });
        }
        j = k;
      }
    }
    i = end;
  }
  return rows;
}

function ownerOf(segment: readonly Message[]): string {
  const m = segment.find((x) => x.role !== "user") ?? segment[0];
  return m?.agentId ?? "";
}

/**
 * The failed attempts of failovers: the ids that another message names in
 * `retryOf` (a runner that fails and tries again marks the new message as a
 * retry of the old one).
 */
export function retriedIds(messages: readonly Message[]): Set<string> {
  const out = new Set<string>();
  for (const m of messages) if (m.retryOf) out.add(m.retryOf);
  return out;
}

/** The direct replies held of each message, by parent id, in seq order. */
export function repliesByParent(messages: readonly Message[]): Map<string, Message[]> {
  const out = new Map<string, Message[]>();
  for (const m of messages) {
    if (!m.replyTo) continue;
    const list = out.get(m.replyTo);
    if (list) list.push(m);
    else out.set(m.replyTo, [m]);
  }
  return out;
}

/** The index of the row that shows message id, or -1. */
export function rowOf(rows: readonly Row[], id: string): number {
  for (let i = rows.length - 1; i >= 0; i--) {
    const r = rows[i]!;
    if (r.kind === "message" && r.message.id === id) return i;
  }
  return -1;
}
