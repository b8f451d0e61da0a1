import { describe, expect, it } from "vitest";
import type { ParleyClient, ParleyEvent, QueuedPrompt, View } from "@parleyhq/client";
import { followPage } from "../src/lib/live";
import { manualFrames, pushedStream, snapshot } from "../../client/test/makers.js";
import { ev, msg, msgEv } from "./helpers";

/**
 * A stand-in for the client: a stream whose frames the test pushes, and
 * pages of events read from an array, counting the reads.
 */
function fakeClient(log: ParleyEvent[]) {
  const stream = pushedStream();
  const reads: string[] = [];
  const client = {
    subscribe: stream.subscribe,
    events: (_id: string, o: { after?: number; limit?: number }) => {
      reads.push(`events after ${o.after}`);
      const page = log.filter((e) => e.seq > (o.after ?? 0)).slice(0, o.limit ?? 100);
      const last = page[page.length - 1];
      return Promise.resolve(page.length === (o.limit ?? 100) && last ? { events: page, nextAfter: last.seq } : { events: page });
    },
    promptQueue: () => Promise.resolve({ prompts: [] as QueuedPrompt[], asOf: 0, exact: true }),
    conversation: (): Promise<View> => Promise.reject(new Error("not read in these tests")),
  };
  return { client: client as unknown as ParleyClient, reads, push: stream.push };
}

const tick = () => new Promise((r) => setTimeout(r, 0));

describe("the flow's window of the log", () => {
  it("reads the flow's window of the log, then adds the live events after it", async () => {
    const log = [msgEv(msg({ id: "a", seq: 2, turn: 1 })), ev(3, "chunk", { messageId: "a", content: "x" }), ev(4, "prompt.dispatched", { id: "a", runner: "b" }), msgEv(msg({ id: "b", seq: 5, turn: 2, agentId: "b" }))];
    const f = fakeClient(log);
    const frames = manualFrames();
    const page = followPage(f.client, "c", { schedule: frames.schedule });
    const flowWindow = page.flow;
    f.push(snapshot(5, []));
    f.push({ type: "event", event: msgEv(msg({ id: "c", seq: 6, turn: 3 })) });
    f.push({ type: "event", event: ev(7, "chunk", { messageId: "c", content: "y" }) });
    await tick();
    frames.run();
    await tick();
    await tick();
    const flow = flowWindow.getSnapshot();
    expect(flow.events.map((e) => e.seq)).toEqual([2, 4, 5, 6]); // chunks take no place
    expect(flow.after).toBe(0);
    expect(flow.loading).toBe(false);
    expect(f.reads).toContain("events after 0");
    page.close();
  });

  it("starts the flow with the latest part of a long log, and reads earlier parts when asked", async () => {
    // 6000 events: a message every 100 seqs, text deltas between.
    const log: ParleyEvent[] = [];
    for (let seq = 1; seq <= 6000; seq++) {
      log.push(seq % 100 === 0 ? msgEv(msg({ id: `m${seq}`, seq, turn: seq / 100 })) : ev(seq, "chunk", { messageId: "x", content: "y" }));
    }
    const f = fakeClient(log);
    const frames = manualFrames();
    const page = followPage(f.client, "c", { schedule: frames.schedule });
    const flowWindow = page.flow;
    f.push(snapshot(6000, []));
    await tick();
    frames.run();
    for (let i = 0; i < 20 && flowWindow.getSnapshot().loading; i++) await tick();
    let flow = flowWindow.getSnapshot();
    expect(flow.after).toBe(2000);
    expect(flow.events.map((e) => e.seq)).toEqual(Array.from({ length: 40 }, (_, i) => 2100 + 100 * i));
    await flowWindow.loadEarlier();
    flow = flowWindow.getSnapshot();
    expect(flow.after).toBe(0);
    expect(flow.events.length).toBe(60);
    expect(flow.events[0]!.seq).toBe(100);
    page.close();
  });
});
