// Browser benchmarks (npm run bench:browser): how smoothly the UI draws, in
// Debian's Chromium, measured in the page itself.
//
// - A 10,000-message conversation: the time until its first message shows,
//   then frames while the reader scrolls up through its history (older
//   pages are read as the top nears).
// - 1,000 text deltas/s streamed into the conversation on screen: frames
//   while it streams, and how busy the page's main thread is; into a new
//   conversation, and into one of 5,000 messages.
//
// Each runs PARLEY_BROWSER_BENCH_RUNS times (3 by default) for
// PARLEY_BROWSER_BENCH_SECONDS (8) and prints the median of each figure.
// ./scripts/test runs it once, briefly, so that it does not rot: its checks
// are that the page drew frames and showed every delta, never a timing.
// PARLEY_BROWSER_PROFILE=DIR writes the page's CPU profile of each run
// there (open it in Chromium's DevTools, Performance panel).

import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { ParleyClient } from "@parleyhq/client";
import type { Browser, Page } from "playwright-core";
import { afterAll, beforeAll, expect, inject, it } from "vitest";
import { Runner } from "../../../client/test/runner.js";
import { startServer, type Server } from "../../../client/test/server.js";
import { launch, openPage } from "../lib/browser.js";

const runs = Number(process.env["PARLEY_BROWSER_BENCH_RUNS"] ?? 3);
const seconds = Number(process.env["PARLEY_BROWSER_BENCH_SECONDS"] ?? 8);
const profileDir = process.env["PARLEY_BROWSER_PROFILE"];
let profiles = 0;

let server: Server;
let browser: Browser;
let api: ParleyClient;

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"));
  api = new ParleyClient({ baseUrl: server.url });
  browser = await launch();
});

afterAll(async () => {
  await browser?.close();
  await server?.stop();
});

/** Frame figures of one run, in milliseconds. */
interface Frames {
  frames: number;
  fps: number;
  p50: number;
  p95: number;
  p99: number;
  max: number;
  /** Frames later than 1.5 vsyncs (25 ms): a frame the screen missed. */
  dropped: number;
  /** Tasks over 50 ms (the Long Tasks API). */
  longTasks: number;
  /** The main thread's busy share of the time (Chromium's TaskDuration), and the shares of script, layout and style. */
  busy: number;
  script: number;
  layout: number;
  style: number;
}

/** Records frame intervals in the page for `secs`; `step` runs at each frame (a scroll, say). */
async function measureFrames(page: Page, secs: number, scroll: boolean): Promise<Frames> {
  const cdp = await page.context().newCDPSession(page);
  await cdp.send("Performance.enable");
  const durations = async () => {
    const { metrics } = await cdp.send("Performance.getMetrics");
    const v = (name: string) => metrics.find((m) => m.name === name)?.value ?? 0;
    return { task: v("TaskDuration"), script: v("ScriptDuration"), layout: v("LayoutDuration"), style: v("RecalcStyleDuration") };
  };
  if (profileDir) {
    await cdp.send("Profiler.enable");
    await cdp.send("Profiler.start");
  }
  const t0 = await durations();
  const w0 = Date.now();
  const r = await page.evaluate(
    async ({ secs, scroll }) => {
      const log = document.querySelector<HTMLElement>('[role="log"]')!;
      const gaps: number[] = [];
      let longTasks = 0;
      const obs = new PerformanceObserver((l) => (longTasks += l.getEntries().length));
      obs.observe({ type: "longtask", buffered: false });
      await new Promise<void>((done) => {
        let last = performance.now();
        const end = last + secs * 1000;
        const tick = (now: number) => {
          gaps.push(now - last);
          last = now;
          if (scroll) log.scrollTop = Math.max(0, log.scrollTop - 300);
          if (now < end) requestAnimationFrame(tick);
          else done();
        };
        requestAnimationFrame(tick);
      });
      obs.disconnect();
      return { gaps, longTasks };
    },
    { secs, scroll },
  );
  const t1 = await durations();
  const wall = (Date.now() - w0) / 1000;
  if (profileDir) {
    const { profile } = await cdp.send("Profiler.stop");
    mkdirSync(profileDir, { recursive: true });
    writeFileSync(join(profileDir, `${scroll ? "scroll" : "stream"}-${++profiles}.cpuprofile`), JSON.stringify(profile));
  }
  await cdp.detach();
  const g = r.gaps.slice(1).sort((a, b) => a - b); // the first interval waits for the first frame
  const q = (p: number) => g[Math.min(g.length - 1, Math.floor(p * g.length))] ?? 0;
  return {
    frames: g.length,
    fps: g.length / secs,
    p50: q(0.5),
    p95: q(0.95),
    p99: q(0.99),
    max: g[g.length - 1] ?? 0,
    dropped: g.filter((x) => x > 25).length,
    longTasks: r.longTasks,
    busy: (t1.task - t0.task) / wall,
    script: (t1.script - t0.script) / wall,
    layout: (t1.layout - t0.layout) / wall,
    style: (t1.style - t0.style) / wall,
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.floor(s.length / 2)] ?? 0;
}

/** Prints the medians of the runs as a Markdown table row by figure. */
function report(name: string, rows: Record<string, number>[]): Record<string, number> {
  const keys = Object.keys(rows[0]!);
  const med = Object.fromEntries(keys.map((k) => [k, median(rows.map((r) => r[k]!))]));
  const fmt = (v: number) => (Number.isInteger(v) ? String(v) : v.toFixed(v < 1 ? 2 : 1));
  console.log(`\n${name} (median of ${rows.length}, ${seconds} s each)\n| ${keys.join(" | ")} |\n|${keys.map(() => "---:").join("|")}|\n| ${keys.map((k) => fmt(med[k]!)).join(" | ")} |`);
  return med;
}

/** `pairs` × 2 messages as an older agent-memory store's rows: questions, and answers with markdown and now and then a tool call. */
function history(pairs: number): string {
  const rows: string[] = [];
  const at = Date.parse("2026-01-01T00:00:00Z");
  for (let i = 0; i < pairs; i++) {
    const q = `q${i}`;
    rows.push(JSON.stringify({ agentId: "asker", role: "user", sender: "HUMAN", content: `Question ${i}: what does item ${i} of the list hold, and why?`, messageId: q, createdAt: at + i * 2000 }));
    const body =
      i % 5 === 0
        ? `Item ${i} holds **three** things:\n\n- a name\n- a *value*\n- a note\n\n\`\`\`json\n{"item": ${i}, "ok": true}\n\`\`\`\n`
        : `Item ${i} holds the value ${i * 7}. It was set by the loader on the first pass; nothing changed it since. `.repeat(1 + (i % 3));
    const row: Record<string, unknown> = { agentId: "answerer", role: "assistant", sender: "answerer", content: body, messageId: `a${i}`, replyToMessageId: q, createdAt: at + i * 2000 + 1000 };
    if (i % 7 === 0) row["tool_calls"] = [{ id: `call${i}`, type: "function", function: { name: "lookup", arguments: JSON.stringify({ item: i }) } }];
    rows.push(JSON.stringify(row));
  }
  return rows.join("\n") + "\n";
}

it("scrolls a 10,000-message conversation", async () => {
  const imported = await api.importConversation(history(5000), { title: "ten thousand", participants: ["asker", "answerer"] });
  expect(imported.messages).toBe(10_000);
  const id = imported.conversation.id;
  const rows: Record<string, number>[] = [];
  for (let i = 0; i < runs; i++) {
    const tp = await openPage(browser);
    const t0 = Date.now();
    await tp.page.goto(`${server.url}/c/${id}`);
    await tp.page.getByRole("article").first().waitFor();
    const open = Date.now() - t0;
    await tp.page.waitForTimeout(500);
    const f = await measureFrames(tp.page, seconds, true);
    const shown = await tp.page.$$eval("article", (a) => a.length);
    const heap = await tp.page.evaluate(() => (performance as unknown as { memory?: { usedJSHeapSize: number } }).memory?.usedJSHeapSize ?? 0);
    expect(f.frames).toBeGreaterThan(0);
    expect(shown).toBeLessThan(200); // only what is on screen, and a few around it
    expect(tp.errors).toEqual([]);
    rows.push({ "open ms": open, ...f, "articles in page": shown, "JS heap MiB": heap / 2 ** 20 });
    await tp.close();
  }
  report("10,000 messages: open, then scroll up 300 px a frame", rows);
});

/**
 * Streams 1,000 text deltas/s into a new message of conversation `id`, shown
 * in a page, for `seconds`, and measures the page's frames meanwhile;
 * `ready` is what shows once the page has the conversation. Every delta must
 * be shown, once.
 */
async function streamInto(id: string, ready: (page: Page) => Promise<unknown>): Promise<Record<string, number>> {
  const tp = await openPage(browser);
  await tp.page.goto(`${server.url}/c/${id}`);
  await ready(tp.page);
  const runner = await Runner.connect(server.url, id, "streamer");
  await runner.create("m1");
  // 1,000 deltas/s: 10 every 10 ms, at most 64 unacknowledged; every 40th ends a paragraph.
  let sent = 0;
  let text = "";
  const inFlight: Promise<number>[] = [];
  const start = Date.now();
  const pump = (async () => {
    while (Date.now() - start < (seconds + 1) * 1000) {
      const due = Math.floor((Date.now() - start) / 1000 * 1000);
      while (sent < due) {
        const d = sent % 40 === 39 ? `w${sent}.\n\n` : `w${sent} `;
        text += d;
        sent++;
        inFlight.push(runner.text("m1", d));
        if (inFlight.length >= 64) await inFlight.shift();
      }
      await new Promise((r) => setTimeout(r, 10));
    }
    await Promise.all(inFlight);
  })();
  await tp.page.waitForTimeout(500);
  const f = await measureFrames(tp.page, seconds, false);
  await pump;
  const rate = sent / ((Date.now() - start) / 1000);
  await runner.finalize("m1");
  runner.close();
  // Every delta shown, once: the page's text is the text sent.
  const squeeze = (s: string) => s.replace(/\s+/g, "");
  await expect.poll(async () => squeeze((await tp.page.locator('[data-message-id="m1"] .md').allTextContents()).join("")), { timeout: 15_000 }).toBe(squeeze(text));
  expect(f.frames).toBeGreaterThan(0);
  expect(tp.errors).toEqual([]);
  await tp.close();
  return { "deltas/s": rate, ...f };
}

it("streams 1,000 deltas/s into the conversation on screen", async () => {
  const rows: Record<string, number>[] = [];
  for (let i = 0; i < runs; i++) {
    const id = (await api.createConversation({ title: `deltas ${i}`, turnPolicy: "free" })).conversation.id;
    rows.push(await streamInto(id, (page) => page.getByText("No messages yet.").waitFor()));
  }
  report("1,000 deltas/s into the message on screen", rows);
});

it("streams 1,000 deltas/s into a 5,000-message conversation", async () => {
  const rows: Record<string, number>[] = [];
  for (let i = 0; i < runs; i++) {
    const imported = await api.importConversation(history(2500), { title: `five thousand ${i}`, participants: ["asker", "answerer"] });
    expect(imported.messages).toBe(5_000);
    rows.push(await streamInto(imported.conversation.id, (page) => page.getByRole("article").first().waitFor()));
  }
  report("1,000 deltas/s into a 5,000-message conversation", rows);
});
