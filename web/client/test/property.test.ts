// The fold against streams recorded from a real server: whatever moment a
// client joins at, and however (a snapshot, a position, the whole log), it
// shows exactly the server's messages, prompt queue and guidance at every
// later moment the server stood still, once it read what its snapshot
// summarized and the queue the snapshot does not carry.

import { describe, expect, it } from "vitest";
import {
  applyEvent,
  emptyState,
  foldFrame,
  holdMessage,
  missing,
  summarize,
  withQueue,
  type ConversationState,
  type Frame,
  type Message,
  type QueuedPrompt,
} from "../src/index.js";
import { canonical, recordings, type Recording, type Sample } from "./fixtures.js";

/** The frames of a recording from index from to (not including) index to. */
function fold(s: ConversationState, frames: Frame[], from: number, to: number): ConversationState {
  for (let i = from; i < to; i++) s = foldFrame(s, frames[i]!);
  return s;
}

/** The index of the first frame after the server stood still at seq: the event seq+1, or the end. */
function end(r: Recording, seq: number): number {
  return r.frameOf.get(seq + 1) ?? r.frames.length;
}

/** The texts of prompts, as `ParleyClient.promptTexts` reads them from their prompt.queued events. */
function withTexts(r: Recording, queue: QueuedPrompt[]): QueuedPrompt[] {
  return queue.map((p) => ({
    ...p,
    content: p.parts
      .map((seq) => {
        const f = r.frames[r.frameOf.get(seq)!]!;
        return f.type === "event" && f.event.type === "prompt.queued" ? (f.event.data.content ?? "") : "";
      })
      .join("\n\n"),
  }));
}

/**
 * Reads what the snapshot summarized as the server had it at a sample
 * (`ParleyClient.message`): each message the server still has is then
 * held whole.
 */
function fetchMissing(s: ConversationState, at: Sample): ConversationState {
  for (const id of missing(s)) {
    const m = at.messages.find((x) => x.id === id);
    if (m) s = holdMessage(s, m);
  }
  const left = missing(s).filter((id) => at.messages.some((m) => m.id === id));
  expect(left, `at seq ${at.seq}: still summarized after reading them`).toEqual([]);
  return s;
}

/** canonical, remembered per object: messages that did not change keep their identity. */
const seen = new WeakMap<object, string>();
function canon(v: object): string {
  let c = seen.get(v);
  if (c === undefined) {
    c = canonical(v);
    seen.set(v, c);
  }
  return c;
}

/**
 * Checks a client's state at a sample: every message it holds is the
 * server's as the server shows it (a summary, as a summary); it holds every
 * message still streaming and every one at or after floor; its prompt
 * queue (with texts) and guidance are the server's, and so is its head
 * unless it says it is stale.
 */
function check(r: Recording, s: ConversationState, at: Sample, floor: number, how: string): void {
  const where = `${r.name}, ${how}, at seq ${at.seq}`;
  const server = new Map(at.messages.map((m) => [m.id, m]));
  const held = new Set<string>();
  for (const m of s.messages) {
    held.add(m.id);
    const want = server.get(m.id);
    expect(want, `${where}: shows ${m.id}, which the server does not have`).toBeDefined();
    const [got, w] = m.summarized ? [canonical(summarize(m, 0)), canonical(summarize(want!, 0))] : [canon(m), canon(want!)];
    if (got !== w) expect(got, `${where}: message ${m.id}`).toBe(w);
  }
  for (const m of at.messages) {
    if (!held.has(m.id) && (m.status === "streaming" || m.seq >= floor)) {
      expect.fail(`${where}: lacks message ${m.id} (seq ${m.seq}, ${m.status}; snapshot from seq ${floor})`);
    }
  }
  expect(s.messages.map((m) => m.seq), `${where}: order`).toEqual([...s.messages].map((m) => m.seq).sort((a, b) => a - b));
  expect(s.queue.known, `${where}: queue known`).toBe(true);
  expect(canonical(s.queue.prompts), `${where}: queue`).toBe(canonical(withTexts(r, at.queue)));
  const g = (x: { nextAgentId: string; kind: string; turn: number } | null) => (x ? `${x.nextAgentId}/${x.kind}/${x.turn}` : "none");
  expect(g(s.guidance), `${where}: guidance`).toBe(g(at.guidance));
  if (!s.headStale) expect(canonical({ ...s.head, lastSeq: 0 }), `${where}: head`).toBe(canonical({ ...at.head, lastSeq: 0 }));
  expect(s.position?.seq, `${where}: position`).toBe(at.seq);
}

/** The seq of the oldest message a snapshot holds of the newest it keeps (older ones are left out). */
function floorOf(init: { messages?: Message[] }, n: number): number {
  const ms = init.messages ?? [];
  return ms.length >= n ? ms[ms.length - n]!.seq : 0;
}

const all = recordings();

describe.each(all.map((r) => [r.name, r] as const))("recorded stream %s", (_name, r) => {
  it("is a real recording", () => {
    expect(r.samples.length).toBeGreaterThan(20);
    const types = new Set(r.frames.flatMap((f) => (f.type === "event" ? [f.event.type] : [])));
    for (const t of ["message", "chunk", "part.updated", "message.updated", "messages.removed", "prompt.queued", "prompt.dispatched"]) {
      expect(types, t).toContain(t);
    }
    expect(r.samples.some((s) => s.init.messages?.some((m) => m.summarized))).toBe(true);
    expect(r.frames.some((f) => f.type === "guidance")).toBe(true);
  });

  it("folded from seq 0 shows the server at every moment", () => {
    let s = emptyState;
    let at = 0;
    for (const sample of r.samples) {
      const to = end(r, sample.seq);
      s = fold(s, r.frames, at, to);
      at = to;
      check(r, s, sample, 0, "after=0");
    }
  });

  it("joined by a snapshot at any moment, shows the server at every later moment", () => {
    for (const [k, join] of r.samples.entries()) {
      // The snapshot's summaries are read at once, after more frames came
      // (late), or by a read that overtook the stream (ahead: the server
      // was two moments further; the stream shows them from then on).
      for (const when of ["now", "late", "ahead"] as const) {
        let s = foldFrame(emptyState, { type: "init", init: join.init });
        expect(s.queue.known).toBe(false);
        const ahead = r.samples[k + 2];
        if (when === "ahead" && !ahead) continue;
        if (when === "now") s = fetchMissing(s, join);
        if (when === "ahead") s = fetchMissing(s, ahead!);
        s = withQueue(s, withTexts(r, join.queue), join.seq);
        const floor = floorOf(join.init, r.snapshotMessages);
        let at = end(r, join.seq);
        for (const [i, sample] of r.samples.entries()) {
          if (i <= k) continue;
          const to = end(r, sample.seq);
          s = fold(s, r.frames, at, to);
          at = to;
          if (when === "ahead" && i < k + 2) continue;
          s = fetchMissing(s, sample);
          check(r, s, sample, floor, `snapshot at seq ${join.seq}, read ${when}`);
        }
      }
    }
  });

  it("joined from a position at any moment, shows the server at every later moment", () => {
    // A client that read the log up to seq p, then subscribed with
    // position p while the server was at seq j >= p: a recovered init (head
    // and guidance as of j), the events after p, then live frames.
    const seqs = r.samples.map((s) => s.seq);
    for (const [i, join] of r.samples.entries()) {
      for (const back of [0, 1, 4]) {
        const p = seqs[Math.max(0, i - back)]!;
        let s = emptyState;
        for (let seq = 1; seq <= p; seq++) {
          const f = r.frames[r.frameOf.get(seq)!]!;
          if (f.type === "event") s = applyEvent(s, f.event);
        }
        s = foldFrame(s, {
          type: "init",
          init: { ...join.init, recovered: true, position: { seq: p, epoch: join.init.position.epoch ?? "" }, messages: undefined },
        });
        for (let seq = p + 1; seq <= join.seq; seq++) s = foldFrame(s, r.frames[r.frameOf.get(seq)!]!);
        check(r, s, join, 0, `position ${p} at seq ${join.seq}`);
        let at = end(r, join.seq);
        for (const sample of r.samples.slice(i + 1)) {
          const to = end(r, sample.seq);
          s = fold(s, r.frames, at, to);
          at = to;
          check(r, s, sample, 0, `position ${p} at seq ${join.seq}`);
        }
      }
    }
  });
});
