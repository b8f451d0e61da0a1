// The conversation list in Chromium, on an open server with hundreds of
// conversations: paging as the reader scrolls, search by title on the
// server, rows that follow the conversations live and move to the top on
// activity, and the filters ("Mine", participant, metadata) kept in the URL.

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

  it("puts a conversation that gets activity at the top, live, and says whose turn is open", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    const titles = page.locator(".conv-row-title");
    await expect.poll(() => titles.first().textContent()).not.toBe("Weekly report 7");
    let old = "";
    for await (const v of api.conversations({ title: "Weekly report 7" })) if (v.conversation.title === "Weekly report 7") old = v.conversation.id;
    await api.postMessage(old, { agentId: "writer", content: "a late draft" });
    await expect.poll(() => titles.first().textContent(), { timeout: 15_000 }).toBe("Weekly report 7");
    const row = page.getByRole("link", { name: /^Weekly report 7\b/ });
    expect(await row.locator(".conv-row-live").textContent()).toBe("turn open: writer");
    expect(await row.locator(".conv-row-turn").textContent()).toBe("continuing: writer");
    // Each conversation once: the one that moved is no longer further down.
    expect(await page.getByRole("link", { name: /^Weekly report 7\b/ }).count()).toBe(1);
  });

  it("filters by Mine, participant and metadata, on the server, and keeps the filters in the URL across a reload", async () => {
    const tag = `Filtered ${Date.now()}`;
    const mine = (await api.createConversation({ title: `${tag} red mine`, participants: ["you", "editor"], metadata: { team: "red" } })).conversation.id;
    await api.createConversation({ title: `${tag} blue`, participants: ["editor"], metadata: { team: "blue" } });
    await api.createConversation({ title: `${tag} red other`, participants: ["writer"], metadata: { team: "red", n: 1 } });
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    const titles = () => page.locator(".conv-row-title").allTextContents();
    await page.getByRole("searchbox", { name: "Search by title" }).fill(tag);
    await expect.poll(titles).toEqual([`${tag} red other`, `${tag} blue`, `${tag} red mine`]);

    // "Mine" from the keyboard: the person the page writes as ("you" on an open server).
    const mineButton = page.getByRole("button", { name: /^Mine/ });
    await mineButton.focus();
    await page.keyboard.press("Space");
    expect(await mineButton.getAttribute("aria-pressed")).toBe("true");
    await expect.poll(titles).toEqual([`${tag} red mine`]);
    await expect.poll(() => new URL(page.url()).searchParams.get("mine")).toBe("1");
    await page.reload();
    await expect.poll(titles).toEqual([`${tag} red mine`]);
    expect(await page.getByRole("button", { name: /^Mine/ }).getAttribute("aria-pressed")).toBe("true");
    expect(await page.getByRole("searchbox", { name: "Search by title" }).inputValue()).toBe(tag);
    await page.getByRole("button", { name: /^Mine/ }).click();

    await page.getByRole("textbox", { name: "Participant" }).fill("editor");
    await expect.poll(titles).toEqual([`${tag} blue`, `${tag} red mine`]);
    await page.getByRole("textbox", { name: "Metadata" }).fill("team=red");
    await expect.poll(titles).toEqual([`${tag} red mine`]);
    await expect.poll(() => page.locator(".list-note").textContent()).toBe(`1 conversation whose title contains “${tag}”, with participant editor, with team=red`);
    await expect.poll(() => new URL(page.url()).search).toContain("metadata.team=red");
    await page.reload();
    await expect.poll(titles).toEqual([`${tag} red mine`]);
    expect(await page.getByRole("textbox", { name: "Participant" }).inputValue()).toBe("editor");
    expect(await page.getByRole("textbox", { name: "Metadata" }).inputValue()).toBe("team=red");
    expect(mine).toBeTruthy();

    // A number is not the string "1"; what is not key=value says so and changes nothing.
    await page.getByRole("textbox", { name: "Participant" }).fill("");
    await page.getByRole("textbox", { name: "Metadata" }).fill("n=1");
    await page.getByText("No conversation matches these filters.").waitFor();
    await page.getByRole("textbox", { name: "Metadata" }).fill("team");
    await page.getByRole("alert").filter({ hasText: "“team” is not key=value" }).waitFor();
    expect(await page.getByRole("textbox", { name: "Metadata" }).getAttribute("aria-invalid")).toBe("true");
    await page.getByRole("button", { name: "Clear filters" }).click();
    await expect.poll(() => new URL(page.url()).search).toBe("");
  });

  for (const size of [
    { name: "1280", viewport: { width: 1280, height: 800 } },
    { name: "390", viewport: { width: 390, height: 844 }, isMobile: true, hasTouch: true },
  ]) {
    it(`fits its filters at ${size.name} px: no horizontal scroll, no text cut off`, async () => {
      const { page } = await browser.open({ viewport: size.viewport, isMobile: size.isMobile, hasTouch: size.hasTouch });
      const id = (await api.createConversation({ title: `Fits ${size.name}`, participants: ["writer", "editor"], members: ["you"], metadata: { team: "layout" } })).conversation.id;
      await api.postMessage(id, { agentId: "writer", content: "open turn" });
      await page.goto(server.url + "/?mine=1&participant=writer&metadata.team=layout");
      const row = page.getByRole("link", { name: new RegExp(`Fits ${size.name}`) });
      await row.waitFor();
      expect(await page.getByRole("button", { name: /^Mine/ }).getAttribute("aria-pressed")).toBe("true");
      const widths = await page.evaluate(() => ({ scroll: document.documentElement.scrollWidth, client: document.documentElement.clientWidth }));
      expect(widths.scroll).toBeLessThanOrEqual(widths.client);
      // Every control of the bar and every part of the row is on the screen, its text whole.
      const cut = await page.evaluate(() =>
        [...document.querySelectorAll(".list-filters button, .list-filters label span, .list-filters input, .conv-row-live, .conv-row-turn, .conv-row-when")]
          .filter((e) => {
            const r = e.getBoundingClientRect();
            return r.width === 0 || r.left < 0 || r.right > window.innerWidth || (e.tagName !== "INPUT" && e.scrollWidth > e.clientWidth + 1);
          })
          .map((e) => e.tagName + "." + e.className + ": " + e.textContent),
      );
      expect(cut).toEqual([]);
      for (const name of ["Participant", "Metadata"]) {
        const box = (await page.getByRole("textbox", { name }).boundingBox())!;
        expect(box.width, name).toBeGreaterThanOrEqual(100);
      }
      await screenshot(page, `list-filters-${size.name}`);
    });
  }
});
