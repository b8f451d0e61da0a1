// The conversation list in Chromium, on an open server with hundreds of
// conversations: paging as the reader scrolls, search by title on the
// server, and rows that follow the conversations live.

import { ParleyClient } from "@parleyhq/client";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startServer, type Server } from "../../client/test/server.js";
import { screenshot, browserPerFile } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;
const N = 250;

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"), { args: ["-create-rate", "0"] }); // no bound on creating, for the setup
  api = new ParleyClient({ baseUrl: server.url });
  for (let i = 0; i < N; i++) await api.createConversation({ title: `Weekly report ${i}`, participants: ["writer", "editor"] });
});

afterAll(async () => {
  await server?.stop();
});


describe("the conversation list", () => {
  it("pages as the reader scrolls, and puts only the rows on screen in the page", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    const note = page.locator(".list-note");
    await expect.poll(() => note.textContent()).toBe("100+ conversations");
    const rows = page.getByRole("listitem");
    expect(await rows.count()).toBeLessThan(40);
    const list = page.getByRole("list", { name: "Conversations" });
    for (let i = 0; i < 40 && (await note.textContent()) !== `${N} conversations`; i++) {
      await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
      await page.waitForTimeout(100);
    }
    expect(await note.textContent()).toBe(`${N} conversations`);
    await list.evaluate((el) => (el.scrollTop = el.scrollHeight));
    await page.getByRole("link", { name: /Weekly report 0\b/ }).waitFor();
    expect(await rows.count()).toBeLessThan(40);
    await screenshot(page, "list");
  });

  it("searches titles on the server, beyond the pages loaded", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    await page.getByRole("link", { name: /Weekly report 249\b/ }).waitFor();
    // "report 1" is in 111 titles (1, 10–19, 100–199), most of them past the first page.
    await page.getByRole("searchbox", { name: "Search by title" }).fill("REPORT 1");
    await expect.poll(() => page.locator(".list-note").textContent()).toBe("100+ conversations whose title contains “REPORT 1”");
    await page.getByRole("searchbox", { name: "Search by title" }).fill("report 12");
    await expect.poll(() => page.locator(".list-note").textContent()).toBe("11 conversations whose title contains “report 12”");
    const titles = await page.locator(".conv-row-title").allTextContents();
    expect(titles).toEqual(["Weekly report 129", ...Array.from({ length: 9 }, (_, i) => `Weekly report ${128 - i}`), "Weekly report 12"]);
    await page.getByRole("searchbox", { name: "Search by title" }).fill("no such title");
    await page.getByText("No conversation has such a title.").waitFor();
  });

  it("shows a new conversation, and whose turn it is, without a reload", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    await page.getByRole("link", { name: /Weekly report 249\b/ }).waitFor();
    const id = (await api.createConversation({ title: "Fresh one", participants: ["writer", "editor"], members: ["reader"] })).conversation.id;
    const row = page.getByRole("link", { name: /Fresh one/ });
    await row.waitFor({ timeout: 15_000 });
    expect(await row.locator(".conv-row-turn").textContent()).toBe("next: writer");
    // Who takes part (participants, then members), and when it last changed: its last event, just now.
    expect(await row.locator(".conv-row-who").textContent()).toBe("writer, editor, reader");
    const created = (await api.conversation(id)).head.lastEventAt!;
    expect(await row.locator(".conv-row-when").getAttribute("title")).toBe(created);
    expect(await row.locator(".conv-row-when").textContent()).toMatch(/^(just now|\d+ s ago)$/);
    await api.postMessage(id, { agentId: "writer", content: "draft", finality: "turn" });
    await expect.poll(() => row.locator(".conv-row-turn").textContent(), { timeout: 15_000 }).toBe("next: editor");
    const written = (await api.conversation(id)).head.lastEventAt!;
    expect(written > created).toBe(true);
    await expect.poll(() => row.locator(".conv-row-when").getAttribute("title")).toBe(written);
    expect(await row.locator(".conv-row-when").textContent()).toMatch(/^(just now|\d+ s ago)$/);
  });

  it("fits a phone: no horizontal scroll at 390 px, each row's title, people, turn and time on the screen", async () => {
    const { page } = await browser.open({ viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true, deviceScaleFactor: 2 });
    await api.createConversation({
      title: "A conversation with a title far too long to fit on a phone's screen in one line, however it is set",
      participants: ["a-writer-with-a-long-name", "an-editor-with-a-longer-name", "a-third-agent"],
      members: ["someone-reading-along"],
    });
    await page.goto(server.url + "/");
    const row = page.getByRole("link", { name: /far too long/ });
    await row.waitFor();
    const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
    expect(widths.client).toBe(390);
    expect(widths.scroll).toBeLessThanOrEqual(widths.client);
    // Nothing on the page is wider than the screen.
    const wide = await page.evaluate(() =>
      [...document.querySelectorAll("body *")]
        .filter((e) => {
          const r = e.getBoundingClientRect();
          return r.width > 0 && (r.right > window.innerWidth + 1 || r.left < -1) && getComputedStyle(e).position !== "fixed";
        })
        .filter((e) => !e.closest(".skip")) // the skip link shows on focus
        .map((e) => e.tagName + "." + e.className),
    );
    expect(wide).toEqual([]);
    for (const part of [".conv-row-title", ".conv-row-who", ".conv-row-turn", ".conv-row-when"]) {
      const box = (await row.locator(part).boundingBox())!;
      expect(box.x, part).toBeGreaterThanOrEqual(0);
      expect(box.x + box.width, part).toBeLessThanOrEqual(390);
    }
    for (const name of ["Search messages", "Search by title"]) {
      const box = (await page.getByRole("searchbox", { name }).boundingBox())!;
      expect(box.x + box.width, name).toBeLessThanOrEqual(390);
    }
    await screenshot(page, "list-phone");
  });
});
