import { describe, expect, it } from "vitest";
import { Batcher } from "../src/batch.js";
import { withOlder, nextSpan } from "../src/older.js";
import { emptyState, foldFrame, type Frame } from "../src/index.js";
import { ev, msg } from "./makers.js";

/** A scheduler whose frames run when the test says. */
function frames() {
  const queue: (() => void)[] = [];
  return {
    schedule: (cb: () => void) => {
      queue.push(cb);
      let live = true;
      const i = queue.length - 1;
      queue[i] = () => live && cb();
      return () => (live = false);
    },
    run() {
      const q = queue.splice(0);
      for (const f of q) f();
    },
    get waiting() {
      return queue.length;
    },
  };
}

describe("Batcher", () => {
  it("hands over everything pushed between two frames at once, in order, and schedules one frame for it", () => {
    const f = frames();
    const got: number[][] = [];
    const b = new Batcher<number>((xs) => got.push(xs), f.schedule);
    for (let i = 0; i < 1000; i++) b.push(i);
    expect(f.waiting).toBe(1);
    expect(got).toEqual([]);
    f.run();
    expect(got.length).toBe(1);
    expect(got[0]).toEqual([...Array(1000).keys()]);
    b.push(7);
    f.run();
    expect(got[1]).toEqual([7]);
    f.run();
    expect(got.length).toBe(2);
  });

  it("flushes at once when asked, and never twice", () => {
    const f = frames();
    const got: string[][] = [];
    const b = new Batcher<string>((xs) => got.push(xs), f.schedule);
    b.push("a");
    b.flushNow();
    f.run(); // the frame it had asked for was cancelled
    expect(got).toEqual([["a"]]);
  });

  it("drops what waits when closed, and takes no more", () => {
    const f = frames();
    const got: number[][] = [];
    const b = new Batcher<number>((xs) => got.push(xs), f.schedule);
    b.push(1);
    b.close();
    b.push(2);
    f.run();
    expect(got).toEqual([]);
    expect(b.pending).toBe(0);
  });

  it("folds a burst of text deltas into the state with one change per frame", () => {
    const f = frames();
    let state = emptyState;
    let changes = 0;
    const b = new Batcher<Frame>((xs) => {
      for (const x of xs) state = foldFrame(state, x);
      changes++;
    }, f.schedule);
    const m = msg({ id: "r", seq: 2, status: "streaming", parts: [], content: "", updatedSeq: 2 });
    b.push({ type: "init", init: { recovered: false, position: { seq: 2, epoch: "e" }, conversation: { id: "c", epoch: "e", participants: [], turnPolicy: "free", messageFormat: "v2", createdAt: null }, head: { lastSeq: 2, epoch: "e", lastTurn: 1, openTurn: null, claim: null, closed: false, lastClosedSeq: 0 }, guidance: null, messages: [m] } });
    for (let i = 0; i < 500; i++) b.push({ type: "event", event: ev(3 + i, "chunk", { messageId: "r", content: "x" }) });
    f.run();
    expect(changes).toBe(1);
    expect(state.messages[0]!.content).toBe("x".repeat(500));
    expect(state.messages[0]!.updatedSeq).toBe(502);
  });
});

describe("older messages", () => {
  const held = { ...emptyState, messages: [msg({ id: "m5", seq: 50 }), msg({ id: "m6", seq: 60 })] };
  it("are put before the ones held, in seq order, without the ones held or removed meanwhile", () => {
    const s = withOlder(held, [msg({ id: "m3", seq: 30 }), msg({ id: "m1", seq: 10 }), msg({ id: "m2", seq: 20 }), msg({ id: "m5", seq: 50 }), msg({ id: "m7", seq: 70 })], new Set(["m2"]));
    expect(s.messages.map((m) => m.id)).toEqual(["m1", "m3", "m5", "m6"]);
    expect(s.messages[2]).toBe(held.messages[0]);
  });
  it("leave the state as it is when they add nothing", () => {
    expect(withOlder(held, [])).toBe(held);
    expect(withOlder(held, [msg({ id: "m5", seq: 50 })])).toBe(held);
  });
  it("are read in spans that grow when they give few messages and shrink when they give many", () => {
    expect(nextSpan(2048, 0)).toBe(8192);
    expect(nextSpan(2048, 20)).toBe(8192);
    expect(nextSpan(2048, 800)).toBe(512);
    expect(nextSpan(2048, 200)).toBe(2048);
    expect(nextSpan(300, 1000)).toBe(256);
  });
});
