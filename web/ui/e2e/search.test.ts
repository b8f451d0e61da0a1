// Search in Chromium, against a `parley serve` the test fills through the
// API: the list page's search of every conversation's messages, with the
// words found marked and markup shown as text; a hit opening its
// conversation at the message, older than those the page first holds; the
// conversation page's search of its own messages; and a refused search
// saying why.

import { ParleyClient } from "@parleyhq/client";
import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startServer, type Server } from "../../client/test/server.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;
let harbour: string;
let other: string;
let old: string; // a message older than the page first holds
const markup = `<img src=x onerror="window.pwned=1"> the lighthouse <script>window.pwned=2</script> is lit`;

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"));
  api = new ParleyClient({ baseUrl: server.url });
  harbour = (await api.createConversation({ title: "Harbour log", participants: ["keeper", "pilot"], turnPolicy: "free" })).conversation.id;
  other = (await api.createConversation({ title: "Elsewhere", participants: ["sailor"] })).conversation.id;
  for (let i = 1; i <= 200; i++) {
    const content = i === 3 ? "The lighthouse keeper saw a ship at dawn." : i === 150 ? markup : `Entry ${i}: calm seas and a light wind.`;
    const r = await api.postMessage(harbour, { agentId: i % 2 ? "keeper" : "pilot", content, finality: "turn" });
    if (i === 3) old = r.message.id;
  }
  await api.postMessage(other, { agentId: "sailor", content: "A lighthouse in another conversation." });
});

afterAll(async () => {
  await server?.stop();
});

/** The hits a results list shows: each one's text, and the words it marks. */
async function hits(list: Locator): Promise<{ text: string; marked: string[] }[]> {
  return list.locator("li").evaluateAll((lis) =>
    lis.map((li) => ({ text: li.querySelector(".hit-snippet")?.textContent ?? "", marked: [...li.querySelectorAll("mark")].map((m) => m.textContent ?? "") })),
  );
}

/** Waits until message id is shown in the conversation, highlighted and in view. */
async function shownAt(page: Page, id: string): Promise<void> {
  const m = page.locator(`article[data-message-id="${id}"]`);
  await m.waitFor({ timeout: 15_000 });
  await expect.poll(() => m.getAttribute("class")).toContain("highlighted");
  const inView = async () => {
    const [box, list] = [await m.boundingBox(), await page.getByRole("log", { name: "Messages" }).boundingBox()];
    return box !== null && list !== null && box.y >= list.y - 1 && box.y + box.height <= list.y + list.height + 1;
  };
  await expect.poll(inView, { timeout: 5000 }).toBe(true);
}

describe("search", () => {
  it("finds messages in every conversation, marks the words found, and opens a hit at its message", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    await page.getByRole("link", { name: /Harbour log/ }).waitFor();
    await page.getByRole("searchbox", { name: "Search messages" }).fill("LIGHTHOUSE");
    const list = page.getByRole("list", { name: "Messages found" });
    await expect.poll(async () => (await hits(list)).length).toBe(3);
    expect(await page.getByRole("heading", { level: 1 }).textContent()).toBe("Messages found");
    expect(await page.locator(".list-note").textContent()).toBe("3 messages found");
    const shown = await hits(list);
    for (const h of shown) expect(h.marked).toEqual(["lighthouse"]);
    expect(shown.map((h) => h.text)).toContain(markup); // markup is shown as the text it is
    expect(await list.locator("img, script").count()).toBe(0);
    expect(await page.evaluate(() => (window as { pwned?: number }).pwned)).toBeUndefined();
    expect(await list.getByText("Elsewhere").count()).toBe(1); // each hit names its conversation
    await screenshot(page, "search");

    await list.getByRole("link", { name: /keeper saw a ship/ }).click();
    await page.waitForURL(`${server.url}/c/${harbour}?m=${old}`);
    await shownAt(page, old);
    // Back: the list, its search box empty again.
    await page.goBack();
    await page.getByRole("searchbox", { name: "Search messages" }).waitFor();
  });

  it("searches one conversation from its page, and jumps to a message found", async () => {
    const { page } = await browser.open();
    await page.goto(`${server.url}/c/${harbour}`);
    await page.getByRole("status", { name: "Connection: live" }).waitFor();
    await page.getByRole("searchbox", { name: "Search this conversation" }).fill(`"keeper saw"`);
    const list = page.getByRole("region", { name: "Messages found in this conversation" }).getByRole("list", { name: "Messages found" });
    await expect.poll(async () => (await hits(list)).map((h) => h.marked)).toEqual([["keeper saw"]]); // a phrase is marked whole
    await page.getByRole("searchbox", { name: "Search this conversation" }).fill("lighthouse");
    await expect.poll(async () => (await hits(list)).length).toBe(2); // not the other conversation's
    await screenshot(page, "search-conversation");
    await list.getByRole("link", { name: /keeper saw a ship/ }).click();
    await shownAt(page, old);
    expect(await page.getByRole("region", { name: "Messages found in this conversation" }).count()).toBe(0);
  });

  it("says why a search is refused, and when nothing is found", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    const box = page.getByRole("searchbox", { name: "Search messages" });
    await box.fill("é".repeat(600)); // 1200 bytes
    await expect.poll(() => page.getByRole("alert").textContent()).toContain("at most 1024");
    await box.fill("albatross");
    await page.getByText("No message has these words.").waitFor();
  });
});
