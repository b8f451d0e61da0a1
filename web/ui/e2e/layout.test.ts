// No layout shift while text streams, in Chromium against `parley demo`:
// while an answer streams (asked over the API, so that nothing on the page
// is the reader's doing), the browser's Layout Instability API reports no
// shift, the composer's controls do not move, and a reader scrolled up in
// the messages sees them stay where they are.

import type { Page } from "playwright-core";
import { describe, expect, it } from "vitest";
import { demoPerFile, until } from "./lib/demo.js";
import { browserPerFile } from "./lib/browser.js";

const demo = demoPerFile();
const browser = browserPerFile();

/** What the page recorded while answers streamed. */
interface Recorded {
  /** The layout shifts the browser reported that no input of the reader's caused: what moved, from where to where. */
  shifts: string[];
  /** Each distinct place of the composer's controls ("Prompt x,y w×h | Mode …"). */
  composer: string[];
  /** Each distinct scroll position of the message list, and where the first message in view was in it. */
  reading: string[];
  /** How many animation frames had an answer under way (each was checked). */
  streamingFrames: number;
}

declare global {
  interface Window {
    __layout?: Recorded & { on: boolean };
  }
}

/**
 * Starts recording, at every animation frame in which an answer is under way,
 * where the composer's controls are and where the reader is in the
 * messages, and every layout shift the browser reports in such a frame.
 */
async function record(page: Page): Promise<void> {
  await page.evaluate(() => {
    const rec = { shifts: [] as string[], composer: [] as string[], reading: [] as string[], streamingFrames: 0, on: true };
    window.__layout = rec;
    const box = (e: Element | null) => {
      if (!e) return "none";
      const r = e.getBoundingClientRect();
      return `${Math.round(r.x)},${Math.round(r.y)} ${Math.round(r.width)}×${Math.round(r.height)}`;
    };
    // An answer is under way while Stop shows (the streaming message itself may be scrolled out of the page).
    const streaming = () => document.querySelector(".composer button.stop:not(.invisible)") !== null;
    // Shifts are reported after their frame: keep those of frames with a message streaming.
    const times: number[] = [];
    new PerformanceObserver((list) => {
      for (const e of list.getEntries() as (PerformanceEntry & { value: number; hadRecentInput: boolean; sources?: { node?: Node; previousRect: DOMRectReadOnly; currentRect: DOMRectReadOnly }[] })[]) {
        if (e.hadRecentInput || !times.some((t) => Math.abs(t - e.startTime) < 20)) continue;
        // The streaming cursor follows the text it ends: it moves as the text grows, by design.
        const moved = (e.sources ?? []).filter((s) => !(s.node instanceof Element && s.node.classList.contains("cursor")));
        if (moved.length === 0) continue;
        const what = moved.map((s) => {
          const el = s.node instanceof Element ? s.node : s.node?.parentElement;
          const name = el ? `${el.tagName.toLowerCase()}.${el.className}` : "?";
          const r = (x: DOMRectReadOnly) => `${Math.round(x.x)},${Math.round(x.y)} ${Math.round(x.width)}×${Math.round(x.height)}`;
          return `${name} ${r(s.previousRect)} → ${r(s.currentRect)}`;
        });
        rec.shifts.push(`${e.value.toFixed(4)}: ${what.join("; ")}`);
      }
    }).observe({ type: "layout-shift" });
    const push = (list: string[], v: string) => {
      if (list[list.length - 1] !== v) list.push(v);
    };
    const tick = (t: number) => {
      if (!rec.on) return;
      if (streaming()) {
        rec.streamingFrames++;
        times.push(t);
        const controls = { prompt: "textarea[aria-label=Prompt]", kind: "select[aria-label=\"Send as\"]", ask: "select[aria-label=Ask]", mode: "select[aria-label=When]", stop: ".composer button.stop", send: ".composer button.primary" };
        const composer = Object.entries(controls)
          .map(([name, selector]) => `${name} ${box(document.querySelector(selector))}`)
          .join(" | ");
        push(rec.composer, composer);
        const list = document.querySelector(".messages")!;
        const top = list.getBoundingClientRect().top;
        const first = [...list.querySelectorAll("article")].find((a) => a.getBoundingClientRect().bottom > top);
        push(rec.reading, `scrollTop ${Math.round(list.scrollTop)}, ${first?.getAttribute("data-message-id") ?? "?"} at ${first ? Math.round(first.getBoundingClientRect().top - top) : "?"}`);
      }
      requestAnimationFrame(tick);
    };
    requestAnimationFrame(tick);
  });
}

async function stopRecording(page: Page): Promise<Recorded> {
  // Let the observer report the last frames' shifts first.
  await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
  return page.evaluate(() => {
    const rec = window.__layout!;
    rec.on = false;
    return { shifts: rec.shifts, composer: rec.composer, reading: rec.reading, streamingFrames: rec.streamingFrames };
  });
}

/** Opens the demo's conversation and waits until it shows its messages, older ones read. */
async function openDemo(height: number): Promise<Page> {
  const { page } = await browser.open({ viewport: { width: 1280, height } });
  await page.goto(`${demo.server.url}/c/${demo.conversationId}`);
  await page.getByRole("status", { name: "Connection: live" }).waitFor();
  await page.getByRole("article").first().waitFor();
  return page;
}

/** Asks the demo a question over the API and waits until it answered all of it. */
async function ask(question: string): Promise<void> {
  const { api, conversationId } = demo;
  await api.prompt(conversationId, { agentId: "you", content: question });
  await until(async () => (await api.prompts(conversationId)).length > 0 || (await api.conversation(conversationId)).head.openTurn !== null);
  await demo.idle();
}

/**
 * Asks the demo a question over the API (not on the page: nothing the
 * reader does), records the page until the demo answered all of it, and
 * checks that the browser reported no layout shift meanwhile.
 */
async function whileAnswered(page: Page, question: string): Promise<Recorded> {
  await demo.idle();
  await record(page);
  await ask(question);
  const rec = await stopRecording(page);
  expect(rec.streamingFrames, "frames with an answer under way").toBeGreaterThan(5);
  expect(rec.shifts).toEqual([]);
  return rec;
}

describe("no layout shift while text streams", () => {
  it("at the end of the messages, where the page follows the answer: nothing moves but the text", async () => {
    const page = await openDemo(800);
    const rec = await whileAnswered(page, "What is the capital of Australia? (the layout test)");
    expect(rec.composer, "the composer's controls moved").toHaveLength(1);
    expect(rec.composer[0]).toMatch(/^prompt \d+,\d+ \d+×\d+ \| kind \d+,\d+ \d+×\d+ \| ask \d+,\d+ \d+×\d+ \| mode \d+,\d+ \d+×\d+ \| stop \d+,\d+ \d+×\d+ \| send \d+,\d+ \d+×\d+$/);
  });

  it("for a reader scrolled up in the messages: what they read stays in place", async () => {
    const page = await openDemo(560);
    const list = page.getByRole("log", { name: "Messages" });
    // At the top first, so that the page reads the older messages (there are none) before the test.
    // Scrolled up again until it has, as a reader would: a row measured just as the list is scrolled
    // may pin it to the bottom once more, since the page follows the newest message until it sees
    // the reader leave it.
    await until(async () => {
      await list.evaluate((el) => el.scrollTo({ top: 0 }));
      return (await page.locator(".older-note").textContent()) === "The conversation starts here.";
    });
    // Enough messages above to read: ask until the list scrolls well beyond its height.
    for (let i = 0; (await list.evaluate((el) => el.scrollHeight - el.clientHeight)) < 1500; i++) {
      if (i === 4) throw new Error("the conversation did not grow past the list's height");
      await ask(`Which planet is the largest? (to read back, ${i})`);
    }
    // Scrolled up to the middle, as a reader who reads back.
    await list.evaluate((el) => el.scrollTo({ top: Math.round((el.scrollHeight - el.clientHeight) / 2) }));
    await page.evaluate(() => new Promise((r) => setTimeout(r, 300)));
    const before = await list.evaluate((el) => el.scrollTop);
    const rec = await whileAnswered(page, "How many days has a leap year? (the layout test)");
    expect(rec.reading, "the messages moved under the reader").toHaveLength(1);
    expect(rec.reading[0]).toMatch(new RegExp(`^scrollTop ${before}, \\S+ at -?\\d+$`));
    expect(rec.composer).toHaveLength(1);
    // Still where they were, once the answer is done.
    expect(await list.evaluate((el) => el.scrollTop)).toBe(before);
  });
});
