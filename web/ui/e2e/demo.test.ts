// The UI against `parley demo`, in Chromium: what a person sees and does
// in the demo's conversation, each check on what the server holds.

import { readFile } from "node:fs/promises";
import { ParleyClient, type Message } from "@parleyhq/client";
import type { BrowserContextOptions, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Server } from "../../client/test/server.js";
import { startDemo } from "./lib/demo.js";
import { screenshot, browserPerFile } from "./lib/browser.js";
import { seen, squeeze, watchMessage } from "./lib/watch.js";

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;
let conversationId: string;

beforeAll(async () => {
  // The scripted person asks once at the start, then not again within the
  // run (-every 1h), and the scheduled task does not fire within it either
  // (-task-every 1h): the questions are the tests', so a test that waits
  // for the demo to be idle finds it idle until it asks.
  ({ server, conversationId } = await startDemo(inject("parleyBinary")));
  api = new ParleyClient({ baseUrl: server.url });
  await idle();
});

afterAll(async () => {
  await server?.stop();
});


/** Waits until the demo answers nothing: no prompt queued, no turn open, the scribe's turn taken. */
async function idle(): Promise<void> {
  await until(async () => {
    const [q, v] = await Promise.all([api.prompts(conversationId), api.conversation(conversationId)]);
    return q.length === 0 && v.head.openTurn === null && v.guidance?.nextAgentId !== "scribe";
  }, 30_000);
}

async function until(ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`not so within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Opens the demo's conversation from the list, as a person would. */
async function openDemo(opts: BrowserContextOptions = {}): Promise<Page> {
  const { page } = await browser.open(opts);
  await page.goto(server.url + "/");
  await page.getByRole("link", { name: /Parley demo/ }).click();
  await page.waitForURL(`**/c/${conversationId}`);
  await page.getByRole("article").first().waitFor();
  expect(await page.title()).toMatch(/^Parley demo.* · Parley$/);
  return page;
}

/** Types a question into the prompt box and sends it with Enter. */
async function ask(page: Page, question: string): Promise<void> {
  const box = page.getByRole("textbox", { name: "Prompt" });
  await box.fill(question);
  await box.press("Enter");
  await expect.poll(() => box.inputValue()).toBe("");
}

/** The id of the supervisor's answer that starts streaming next on the page (a failed attempt before it is skipped). */
async function nextAnswer(page: Page, known: ReadonlySet<string> = new Set()): Promise<string> {
  let id = "";
  await until(async () => {
    const ids = await page.$$eval('article[data-message-id^="answer-"]', (els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
    id = ids.find((x) => !known.has(x)) ?? "";
    return id !== "";
  });
  return id;
}

async function answersOnPage(page: Page): Promise<Set<string>> {
  return new Set(await page.$$eval('article[data-message-id^="answer-"]', (els) => els.map((e) => e.getAttribute("data-message-id") ?? "")));
}

/** The text parts of a message as the server holds it, whitespace removed. */
function serverText(m: Message): string {
  return squeeze(m.parts.map((p) => (p.type === "text" ? (p.text ?? "") : "")).join(""));
}

async function finished(id: string): Promise<Message> {
  let m: Message | undefined;
  await until(async () => {
    m = await api.message(conversationId, id);
    return m.status !== "streaming";
  }, 30_000);
  return m!;
}

describe("the demo in a browser", () => {
  it("streams a reply token by token, with its tool card going running → completed", async () => {
    const page = await openDemo();
    await screenshot(page, "conversation-before");
    const known = await answersOnPage(page);
    await ask(page, "What is the capital of Australia? (asked in the browser test)");
    const id = await nextAnswer(page, known);
    await watchMessage(page, id);
    const m = await finished(id);
    expect(m.status).toBe("complete");
    await expect.poll(() => page.locator(`[data-message-id="${id}"]`).getAttribute("data-status")).toBe("complete");
    const s = await seen(page, id);
    const final = serverText(m);
    expect(final).toContain("Canberra");
    // Token by token: many texts, each a prefix of the next, the last the server's.
    expect(s.texts.length).toBeGreaterThanOrEqual(8);
    for (let i = 1; i < s.texts.length; i++) expect(s.texts[i]!.startsWith(s.texts[i - 1]!), `${s.texts[i - 1]} → ${s.texts[i]}`).toBe(true);
    expect(s.texts[s.texts.length - 1]).toBe(final);
    expect(s.tools).toEqual(["search, running", "search, completed"]);
    // The card opens to show its arguments and result.
    const card = page.locator(`[data-message-id="${id}"]`).getByRole("button", { name: "search, completed" });
    await card.click();
    await expect.poll(() => card.getAttribute("aria-expanded")).toBe("true");
    const body = page.locator(`[data-message-id="${id}"] .tool-body`);
    await expect.poll(() => body.textContent()).toContain("Canberra");
    await idle();
    await screenshot(page, "conversation");
  });

  it("marks an answer stopped with Stop", async () => {
    const page = await openDemo();
    const known = await answersOnPage(page);
    await ask(page, "Which planet is the largest? (asked in the browser test)");
    const id = await nextAnswer(page, known);
    const stops: string[] = [];
    page.on("request", (r) => {
      if (r.method() === "POST" && r.url().endsWith("/abort")) stops.push(r.postData() ?? "");
    });
    const stop = page.getByRole("button", { name: "Stop", exact: true });
    await stop.click();
    const m = await finished(id);
    expect(m.status).toBe("canceled");
    // The stop named its target, the prompt whose answer streamed, and
    // nothing else was stopped.
    expect(stops.map((b) => JSON.parse(b || "null") as unknown)).toEqual([{ promptId: m.replyTo }]);
    const aborted: string[] = [];
    for (let after = m.seq; ; ) {
      const { events } = await api.events(conversationId, { after, limit: 1000 });
      if (events.length === 0) break;
      for (const e of events) if (e.type === "prompt.aborted") aborted.push((e.data as { id: string }).id);
      after = events.at(-1)!.seq;
    }
    expect(aborted).toEqual([m.replyTo]);
    const article = page.locator(`[data-message-id="${id}"]`);
    await expect.poll(() => article.getAttribute("data-status")).toBe("canceled");
    await expect.poll(() => article.locator(".mark-stopped").textContent()).toBe("stopped");
    // No answer streams now: Stop is gone from what a screen reader hears.
    await expect.poll(() => page.getByRole("button", { name: "Stop", exact: true }).count()).toBe(0);
    await idle();
  });

  it("resumes after a reload mid-stream with no text twice", async () => {
    const page = await openDemo();
    const known = await answersOnPage(page);
    await ask(page, "How many days has a leap year? (asked in the browser test)");
    const id = await nextAnswer(page, known);
    await watchMessage(page, id);
    await until(async () => (await seen(page, id)).texts.length >= 3);
    const before = await seen(page, id);
    await page.reload();
    await page.locator(`[data-message-id="${id}"]`).waitFor();
    await watchMessage(page, id);
    const m = await finished(id);
    await expect.poll(() => page.locator(`[data-message-id="${id}"]`).getAttribute("data-status")).toBe("complete");
    const after = await seen(page, id);
    const final = serverText(m);
    expect(final).toContain("366");
    // Whatever the page showed, before the reload and after it, was the
    // server's text so far: never a word twice, never a word lost.
    for (const t of [...before.texts, ...after.texts]) expect(final.startsWith(t), `shown: ${t}`).toBe(true);
    expect(after.texts[after.texts.length - 1]).toBe(final);
    await idle();
  });

  it("shows a reply's thread indicator, which jumps to its parent", async () => {
    const page = await openDemo();
    const review = page.getByRole("article", { name: /^Message from reviewer/ }).last();
    const link = review.getByRole("button", { name: /replying to supervisor/ });
    await link.waitFor();
    const reviewId = (await review.getAttribute("data-message-id"))!;
    const parent = (await api.message(conversationId, reviewId)).replyTo!;
    expect(parent).toMatch(/^answer-/);
    await link.click();
    const target = page.locator(`[data-message-id="${parent}"]`);
    await expect.poll(() => target.getAttribute("class")).toContain("highlighted");
    await expect.poll(() => target.evaluate((el) => el === document.activeElement || el.contains(document.activeElement))).toBe(true);
    const box = (await target.boundingBox())!;
    expect(box.y + box.height).toBeGreaterThan(0);
    expect(box.y).toBeLessThan(800);
    // The parent lists the reply, which jumps back.
    await target.getByRole("button", { name: "reviewer" }).click();
    await expect.poll(() => page.locator(`[data-message-id="${reviewId}"]`).getAttribute("class")).toContain("highlighted");
  });

  it("collapses a turn and expands it again", async () => {
    const page = await openDemo();
    // The latest exchange (the reload test's), near the end where the page opens.
    const toggle = page.getByRole("button", { name: /^Exchange: How many days has a leap year\? \(asked in the browser test\)/ });
    await toggle.scrollIntoViewIfNeeded();
    expect(await toggle.getAttribute("aria-expanded")).toBe("true");
    let answer: Message | undefined;
    for await (const m of api.allMessages(conversationId)) if (m.id.startsWith("answer-") && serverText(m).includes("366")) answer = m;
    if (!answer) throw new Error("the leap year's answer is not on the server");
    const answerId = answer.id;
    await page.locator(`[data-message-id="${answerId}"]`).waitFor();
    await toggle.click();
    await expect.poll(() => toggle.getAttribute("aria-expanded")).toBe("false");
    await expect.poll(() => page.locator(`[data-message-id="${answerId}"]`).count()).toBe(0);
    await toggle.click();
    await expect.poll(() => toggle.getAttribute("aria-expanded")).toBe("true");
    await expect.poll(() => page.locator(`[data-message-id="${answerId}"]`).count()).toBe(1);
  });

  it("draws a new block in the flow picture when a turn opens", async () => {
    const page = await openDemo();
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    await flow.waitFor();
    const blocks = () => flow.locator(".block").count();
    await expect.poll(blocks).toBeGreaterThan(0);
    await idle();
    const before = await blocks();
    const open = () => flow.locator(".block-open").count();
    await expect.poll(open).toBe(0);
    await ask(page, "What is 17 times 23? (asked in the browser test)");
    await expect.poll(open, { timeout: 15_000 }).toBeGreaterThan(0);
    expect(await blocks()).toBeGreaterThan(before);
    await screenshot(page, "flow");
    // A block is a link to its turn's messages.
    await idle();
    await expect.poll(open).toBe(0);
  });

  it("downloads the conversation as Markdown and as JSON", async () => {
    const page = await openDemo();
    await idle();
    const [md] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export Markdown" }).click()]);
    expect(md.suggestedFilename()).toBe(`${conversationId}.md`);
    const text = await readFile((await md.path()), "utf8");
    expect(text).toContain("What is the capital of Australia? (asked in the browser test)");
    expect(text).toContain("The answer is Canberra.");
    const [json] = await Promise.all([page.waitForEvent("download"), page.getByRole("button", { name: "Export JSON" }).click()]);
    const doc = JSON.parse(await readFile((await json.path()), "utf8")) as { parley: string; conversation: { id: string }; lastSeq: number };
    expect(doc.parley).toBe("export");
    expect(doc.conversation.id).toBe(conversationId);
    expect(doc.lastSeq).toBe((await api.conversation(conversationId)).head.lastSeq);
  });

  it("reverts from a message, after asking", async () => {
    const page = await openDemo();
    await idle();
    const review = page.getByRole("article", { name: /^Message from reviewer/ }).last();
    const reviewId = (await review.getAttribute("data-message-id"))!;
    await review.getByRole("button", { name: "Revert from this message of reviewer" }).click();
    const dialog = page.getByRole("dialog", { name: "Revert from this message?" });
    await dialog.getByRole("button", { name: "Cancel" }).click();
    expect(await page.locator(`[data-message-id="${reviewId}"]`).count()).toBe(1);
    await review.getByRole("button", { name: "Revert from this message of reviewer" }).click();
    await dialog.getByRole("button", { name: "Revert", exact: true }).click();
    await expect.poll(() => page.locator(`[data-message-id="${reviewId}"]`).count()).toBe(0);
    await expect(api.message(conversationId, reviewId)).rejects.toMatchObject({ status: 404 });
  });

  it("fits a phone: no horizontal scroll at 390 px, every control reachable", async () => {
    const page = await openDemo({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
    expect(widths.client).toBe(390);
    for (const name of ["Prompt", "When"]) {
      const el = page.getByRole(name === "Prompt" ? "textbox" : "combobox", { name });
      const box = (await el.boundingBox())!;
      expect(box.x).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width).toBeLessThanOrEqual(390);
    }
    // Nothing on the page is wider than the screen.
    const wide = await page.evaluate(() =>
      [...document.querySelectorAll("body *")]
        .filter((e) => {
          const r = e.getBoundingClientRect();
          return r.width > 0 && (r.right > window.innerWidth + 1 || r.left < -1) && getComputedStyle(e).position !== "fixed";
        })
        .filter((e) => !e.closest(".flow, pre, .skip")) // the flow picture and code scroll in their own boxes; the skip link shows on focus
        .map((e) => e.tagName + "." + e.className),
    );
    expect(wide).toEqual([]);
    await screenshot(page, "phone");
  });
});
