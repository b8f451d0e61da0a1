// The picture of a conversation's flow, as a pure function of its log:
// agents as lanes (columns), turns as blocks down the page in the order of
// the log, arrows for delegations and for replies from one agent to
// another, and marks for claims, expired claims, resets, aborts, reverts
// and scheduled task runs. The log's streaming details (chunks, tool
// updates, the prompt queue) take no room: one step per event that moves
// the conversation on.

import type { Message, ParleyEvent } from "@parleyhq/client";

/** An agent's column. */
export interface Lane {
  agent: string;
  index: number;
  /** The x of the lane's middle. */
  x: number;
}

/** How a block ended. */
export type BlockEnd = "open" | "closed" | "aborted" | "canceled" | "error" | "continued";

/** What one agent wrote in one turn: a block in its lane. */
export interface Block {
  key: string;
  turn: number;
  agent: string;
  lane: number;
  turnId: string;
  /** The first message of the block, to jump to (none for a block of traces alone). */
  messageId?: string;
  /** A worker delegated into another agent's turn. */
  delegate: boolean;
  y0: number;
  y1: number;
  seq0: number;
  seq1: number;
  messages: number;
  /** How many of its messages a revert removed since (the log keeps them; the messages do not). */
  removed: number;
  end: BlockEnd;
}

/** A delegation (from the delegating agent to its worker) or a reply (from the parent's author to the reply's). */
export interface Arrow {
  key: string;
  kind: "delegation" | "reply";
  from: number;
  to: number;
  y0: number;
  y1: number;
  seq: number;
}

/** A turn event drawn on its agent's lane. */
export interface Mark {
  key: string;
  kind: "claim" | "expired" | "reset" | "abort" | "revert" | "task";
  lane: number;
  y: number;
  seq: number;
  label: string;
}

/** The picture, in its own units (px at scale 1). */
export interface FlowLayout {
  lanes: Lane[];
  blocks: Block[];
  arrows: Arrow[];
  marks: Mark[];
  width: number;
  height: number;
  /** The seq of the first and last event drawn (0 when none). */
  firstSeq: number;
  lastSeq: number;
}

/** Sizes of the picture. */
export interface FlowOptions {
  /** The agents to put first, in this order (the participants). */
  agents?: readonly string[];
  laneWidth?: number;
  /** The height of one step. */
  step?: number;
  /** The room above the first step (the lanes' names). */
  top?: number;
}

const STEP_TYPES = new Set([
  "message",
  "trace",
  "turn.claimed",
  "claim.expired",
  "turn.reset",
  "turn.aborted",
  "delegation",
  "messages.removed",
  "task.run",
]);

/** Reports whether an event takes a step of the picture (or changes how a block ended). */
export function isFlowEvent(e: ParleyEvent): boolean {
  return STEP_TYPES.has(e.type) || e.type === "message.updated";
}

/**
 * Lays the events out (in seq order; others are ignored: see
 * {@link isFlowEvent}). Lanes: the `agents` given, then every other agent
 * in the order it first acts. Each event that moves the conversation on is
 * one step down. A block spans the steps of one agent in one turn; the
 * turn's owner is the first agent that wrote in it, and the others are its
 * delegated workers. A block ends `closed` with the message that closed its
 * turn, `aborted` with a `turn.aborted`, `canceled` or `error` when its
 * last message ended so, `continued` when the turn's owner wrote again
 * after a worker, and is `open` while nothing ended it.
 */
export function layoutFlow(events: readonly ParleyEvent[], opts: FlowOptions = {}): FlowLayout {
  const laneWidth = opts.laneWidth ?? 96;
  const step = opts.step ?? 18;
  const top = opts.top ?? 8;
  const lanes: Lane[] = [];
  const laneOf = new Map<string, number>();
  const lane = (agent: string): number => {
    let i = laneOf.get(agent);
    if (i === undefined) {
      i = lanes.length;
      laneOf.set(agent, i);
      lanes.push({ agent, index: i, x: i * laneWidth + laneWidth / 2 });
    }
    return i;
  };
  for (const a of opts.agents ?? []) lane(a);

  const blocks: Block[] = [];
  const arrows: Arrow[] = [];
  const marks: Mark[] = [];
  const owners = new Map<number, string>();
  /** The block of (turn, agent) still growing: a later block of the same pair starts anew once another block came between. */
  const current = new Map<string, Block>();
  const blockOfMessage = new Map<string, Block>();
  const msgAt = new Map<string, { lane: number; y: number; agent: string }>();
  let last: Block | undefined;
  let n = 0;
  let firstSeq = 0;
  let lastSeq = 0;
  const y = (): number => top + n * step + step / 2;
  /** Ends every block of a turn that a message (in block b) closed. */
  const closeTurn = (turn: number, b: Block): void => {
    for (const [k, other] of current) {
      if (other.turn !== turn) continue;
      if (other.end === "open") other.end = "closed";
      current.delete(k);
    }
    if (b.end === "open") b.end = "closed";
  };

  for (const e of events) {
    if (!isFlowEvent(e)) continue;
    if (e.type === "message.updated") {
      const b = blockOfMessage.get(e.data.id);
      if (b && b.end !== "closed" && b.end !== "aborted") {
        b.end = endOf(e.data, b.end);
        if (e.data.finality !== "none" && e.data.status !== "streaming") closeTurn(b.turn, b);
      }
      continue;
    }
    if (firstSeq === 0) firstSeq = e.seq;
    lastSeq = e.seq;
    const at = y();
    const agent = e.agentId ?? "";
    const mark = (kind: Mark["kind"], who: string, label: string): void => {
      marks.push({ key: `m${e.seq}`, kind, lane: lane(who), y: at, seq: e.seq, label });
    };
    switch (e.type) {
      case "message":
      case "trace": {
        const turn = e.turn;
        if (!owners.has(turn)) owners.set(turn, agent);
        const owner = owners.get(turn)!;
        const key = turn + "\u0000" + agent;
        let b = current.get(key);
        if (!b || (last !== b && last?.turn === turn && agent === owner)) {
          if (b && b.end === "open") b.end = "continued";
          b = {
            key: `b${e.seq}`,
            turn,
            agent,
            lane: lane(agent),
            turnId: e.turnId ?? "",
            delegate: agent !== owner,
            y0: at - step / 2,
            y1: at + step / 2,
            seq0: e.seq,
            seq1: e.seq,
            messages: 0,
            removed: 0,
            end: "open",
          };
          blocks.push(b);
          current.set(key, b);
        }
        b.y1 = at + step / 2;
        b.seq1 = e.seq;
        last = b;
        if (e.type === "message") {
          const m = e.data;
          b.messages++;
          b.messageId ??= m.id;
          blockOfMessage.set(m.id, b);
          b.end = endOf(m, "open");
          if (m.finality !== "none" && m.status !== "streaming") closeTurn(turn, b);
          msgAt.set(m.id, { lane: b.lane, y: at, agent });
          const parent = m.replyTo ? msgAt.get(m.replyTo) : undefined;
          if (parent && parent.agent !== agent) {
            arrows.push({ key: `r${e.seq}`, kind: "reply", from: parent.lane, to: b.lane, y0: parent.y, y1: at, seq: e.seq });
          }
        }
        break;
      }
      case "delegation": {
        const d = e.data;
        const from = lane(d.from || agent);
        const to = lane(d.to);
        arrows.push({ key: `d${e.seq}`, kind: "delegation", from, to, y0: at, y1: at, seq: e.seq });
        break;
      }
      case "turn.claimed":
      case "claim.expired": {
        const c = e.data;
        const who = c.agentId || agent;
        const claimed = e.type === "turn.claimed";
        mark(claimed ? "claim" : "expired", who, claimed ? `${who} claimed turn ${c.turn}` : `the claim of ${who} on turn ${c.turn} expired`);
        break;
      }
      case "turn.reset":
      case "turn.aborted": {
        const turn = e.data.turn || e.turn;
        const reason = e.data.reason ? `: ${e.data.reason}` : "";
        const reset = e.type === "turn.reset";
        mark(reset ? "reset" : "abort", agent, `turn ${turn} ${reset ? "reset" : "aborted"} by ${agent}${reason}`);
        if (e.type === "turn.aborted") {
          for (const [k, b] of current) if (b.turn === turn) {
            if (b.end === "open") b.end = "aborted";
            current.delete(k);
          }
        }
        break;
      }
      case "messages.removed": {
        const ids = e.data.messageIds ?? [];
        for (const id of ids) {
          const b = blockOfMessage.get(id);
          if (b) b.removed++;
          blockOfMessage.delete(id);
        }
        mark("revert", agent, `reverted by ${agent || "someone"}: ${ids.length} removed`);
        break;
      }
      case "task.run": {
        mark("task", agent, `scheduled task ${e.data.taskId} ran`);
        break;
      }
      default:
        break;
    }
    n++;
  }
  return {
    lanes,
    blocks,
    arrows,
    marks,
    width: Math.max(1, lanes.length) * laneWidth,
    height: top + n * step + step,
    firstSeq,
    lastSeq,
  };
}

function endOf(m: Message, was: BlockEnd): BlockEnd {
  if (m.status === "canceled") return "canceled";
  if (m.status === "error") return "error";
  if (m.status === "complete" && m.finality !== "none") return "closed";
  return was === "continued" ? "continued" : "open";
}

/** The owner of each turn, as the log says: the first agent that wrote a message or trace in it. */
export function turnOwners(events: readonly ParleyEvent[]): Map<number, string> {
  const out = new Map<number, string>();
  for (const e of events) {
    if ((e.type === "message" || e.type === "trace") && e.turn > 0 && !out.has(e.turn)) out.set(e.turn, e.agentId ?? "");
  }
  return out;
}

/** The runner each prompt was dispatched to (prompt id → agent), from `prompt.dispatched` events. */
export function dispatches(events: readonly ParleyEvent[]): Map<string, string> {
  const out = new Map<string, string>();
  for (const e of events) if (e.type === "prompt.dispatched" && e.data.runner) out.set(e.data.id, e.data.runner);
  return out;
}

/**
 * Merges two lists of events in seq order into one, each seq once (b's copy
 * wins). Returns a when b adds nothing.
 */
export function mergeEvents(a: readonly ParleyEvent[], b: readonly ParleyEvent[]): readonly ParleyEvent[] {
  if (b.length === 0) return a;
  const last = a[a.length - 1];
  if (last === undefined || b[0]!.seq > last.seq) {
    let sorted = true;
    for (let i = 1; i < b.length; i++) if (b[i]!.seq <= b[i - 1]!.seq) sorted = false;
    if (sorted) return [...a, ...b];
  }
  const bySeq = new Map<number, ParleyEvent>();
  for (const e of a) bySeq.set(e.seq, e);
  for (const e of b) bySeq.set(e.seq, e);
  return [...bySeq.values()].sort((x, y) => x.seq - y.seq);
}
