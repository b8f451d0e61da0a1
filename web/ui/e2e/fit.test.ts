// The conversation page fits its screen, in Chromium against a `parley
// serve` holding a long conversation (imported at once: more than 10,000
// events, turn numbers of five digits, six agents): the head's facts are
// whole at 1280 and 1920 px, every lane of the flow picture is inside the
// flow's box, a phone (390 × 844) gives the messages and the composer the
// screen (a one-line head that opens on a tap, the flow a view of its own),
// and a jump from the flow to an old turn never shows a wrong exchange or
// parent on its way there.

import { ParleyClient } from "@parleyhq/client";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startServer, type Server } from "../../client/test/server.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;
let id: string;
const agents = ["you", "supervisor", "worker", "reviewer", "researcher", "writer"];
/** Exchanges of six messages each: a question of `you`, then each agent replying to the one before. */
const exchanges = 1700;

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"));
  api = new ParleyClient({ baseUrl: server.url });
  const rows: string[] = [];
  let n = 0;
  const at = Date.now() - 3 * 24 * 3600_000;
  for (let x = 1; x <= exchanges; x++) {
    let prev = "";
    for (const a of agents) {
      const messageId = `m${x}-${a}`;
      const row =
        a === "you"
          ? { agentId: "supervisor", role: "user", sender: "you", content: `Question ${x}`, messageId, createdAt: at + n++ * 1000 }
          : { agentId: a, role: "assistant", sender: a, content: `Answer ${x} of ${a}`, messageId, replyToMessageId: prev, createdAt: at + n++ * 1000 };
      rows.push(JSON.stringify(row));
      prev = messageId;
    }
  }
  const imported = await api.importConversation(rows.join("\n") + "\n", { title: "A long conversation of six agents", participants: agents });
  id = imported.conversation.id;
  // supervisor opens the next turn and keeps it: "supervisor continues turn N" in the head.
  await api.postMessage(id, { agentId: "supervisor", content: "Still working on the next step." });
  const head = (await api.conversation(id)).head;
  expect(head.lastSeq).toBeGreaterThan(10_000);
  expect(head.lastTurn).toBeGreaterThan(10_000);
});

afterAll(async () => {
  await server?.stop();
});

/** Opens the conversation's page in a window of that size and waits until it shows its messages. */
async function open(width: number, height: number): Promise<Page> {
  const { page } = await browser.open({ viewport: { width, height } });
  await page.goto(`${server.url}/c/${id}`);
  await page.getByRole("status", { name: "Connection: live" }).waitFor();
  await page.getByRole("article").first().waitFor();
  return page;
}

/** The texts of the page that are cut short (scrollWidth beyond clientWidth) among those matched, and whether the document scrolls sideways. */
function cut(page: Page, selector: string): Promise<{ cut: string[]; sideways: boolean }> {
  return page.evaluate((selector) => {
    const cut = [...document.querySelectorAll<HTMLElement>(selector)].filter((e) => e.scrollWidth > e.clientWidth + 1).map((e) => `${e.textContent} (${e.scrollWidth} > ${e.clientWidth})`);
    const d = document.documentElement;
    return { cut, sideways: d.scrollWidth > d.clientWidth };
  }, selector);
}

describe("the page fits its screen", () => {
  for (const width of [1280, 1920]) {
    it(`shows the head's facts whole at ${width} px with five-digit turns and events`, async () => {
      const page = await open(width, 900);
      const head = page.getByRole("region", { name: "Conversation" });
      const v = await api.conversation(id);
      await head.getByText(`supervisor continues turn ${v.head.lastTurn}`).waitFor();
      await head.getByText(`${v.head.lastSeq} · turn ${v.head.lastTurn}`).waitFor();
      expect(await cut(page, ".conv-head .facts dd, .conv-head .facts dt, .conv-title")).toEqual({ cut: [], sideways: false });
      await screenshot(page, `fit-head-${width}`);
    });

    it(`draws every lane of the flow inside the flow's box at ${width} px`, async () => {
      const page = await open(width, 900);
      const flow = page.getByRole("group", { name: "Flow of the conversation" });
      await flow.getByRole("button").first().waitFor();
      const lanes = await page.evaluate(() => {
        const box = document.querySelector(".flow")!.getBoundingClientRect();
        return [...document.querySelectorAll(".flow-lanes .lane-name")].map((t) => {
          const r = t.getBoundingClientRect();
          return { name: t.textContent, inside: r.left >= box.left && r.right <= box.right };
        });
      });
      expect(lanes).toEqual(agents.map((name) => ({ name, inside: true })));
      expect(await cut(page, ".flow")).toEqual({ cut: [], sideways: false });
    });
  }

  it("gives a phone's screen to the messages and the composer: a one-line head that opens on a tap, the flow a view of its own", async () => {
    const page = await open(390, 844);
    const head = page.getByRole("region", { name: "Conversation" });
    const height = () => head.evaluate((e) => e.getBoundingClientRect().height);
    expect(await height()).toBeLessThanOrEqual(64);
    // Whose turn it is shows in the one line.
    const v = await api.conversation(id);
    await head.getByText(`supervisor continues turn ${v.head.lastTurn}`).waitFor();
    expect(await cut(page, ".conv-head .fact-next dd")).toEqual({ cut: [], sideways: false });
    const list = page.getByRole("log", { name: "Messages" });
    const composer = page.getByRole("textbox", { name: "Prompt" });
    const room = async () => {
      const [l, c] = [(await list.boundingBox())!, (await composer.boundingBox())!];
      return { list: l.height, composerBottom: c.y + c.height };
    };
    const r = await room();
    expect(r.list).toBeGreaterThan(844 * 0.55);
    expect(r.composerBottom).toBeGreaterThan(844 - 90);
    expect((await cut(page, "body")).sideways).toBe(false);
    await screenshot(page, "fit-phone");

    // A tap opens the head with every fact, another closes it.
    const more = page.getByRole("button", { name: "Details of the conversation" });
    await more.click();
    expect(await more.getAttribute("aria-expanded")).toBe("true");
    await head.getByText("Participants").waitFor();
    expect(await cut(page, ".conv-head .facts dd")).toEqual({ cut: [], sideways: false });
    await screenshot(page, "fit-phone-head");
    await more.click();
    await expect.poll(height).toBeLessThanOrEqual(64);

    // The flow is a view of its own: it takes the place of the messages, and back.
    await page.getByRole("button", { name: "Show flow" }).click();
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    await flow.getByRole("button").first().waitFor();
    expect(await list.isVisible()).toBe(false);
    const flowBox = (await page.locator(".flow").boundingBox())!;
    expect(flowBox.height).toBeGreaterThan(844 * 0.55);
    expect((await cut(page, "body")).sideways).toBe(false);
    await screenshot(page, "fit-phone-flow");
    // A block of it shows its message among the messages.
    await flow.getByRole("button").last().click();
    await list.waitFor({ state: "visible" });
    await page.getByRole("button", { name: "Show flow" }).waitFor();
  });

  it("jumps from the flow to an old turn without showing a wrong exchange or parent on the way", async () => {
    const page = await open(1280, 900);
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    // The oldest worker turn the flow shows: far older than the messages the page holds.
    const block = flow.getByRole("button", { name: /^Turn \d+ · worker · closed$/ }).first();
    await block.waitFor();
    const turn = Number(/Turn (\d+)/.exec((await block.getAttribute("aria-label"))!)![1]);
    const x = Math.floor((turn - 1) / agents.length) + 1;
    const target = page.locator(`article[data-message-id="m${x}-worker"]`);
    expect(await target.count()).toBe(0);
    // Every exchange header and "replying to" line shown in the messages' box from the click on.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { __shown: string[] }).__shown = seen;
      const read = () => {
        const list = document.querySelector(".messages");
        if (!list) return;
        const box = list.getBoundingClientRect();
        for (const e of list.querySelectorAll(".exchange-what, .thread-link")) {
          const r = e.getBoundingClientRect();
          if (r.bottom <= box.top || r.top >= box.bottom) continue;
          const t = (e.textContent ?? "").replace(/\s+/g, " ").trim();
          if (!seen.includes(t)) seen.push(t);
        }
      };
      new MutationObserver(read).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
      document.querySelector(".messages")?.addEventListener("scroll", read, true);
    });
    await block.click();
    await target.waitFor({ timeout: 15_000 });
    await expect.poll(() => target.getAttribute("class")).toContain("highlighted");
    // Until the older messages were read above it (after the jump's quiet moment).
    await expect.poll(() => page.evaluate(() => document.querySelector(".messages")!.getAttribute("aria-busy")), { timeout: 10_000 }).toBe("false");
    await new Promise((r) => setTimeout(r, 2000));
    const shown = await page.evaluate(() => (window as unknown as { __shown: string[] }).__shown);
    // Exchanges start with a question of `you`; each agent replies to the one before it.
    const wrong = shown.filter((t) => !/^Exchange: Question \d+$/.test(t) && !/^↳ replying to (you|supervisor|worker|reviewer|researcher)$/.test(t));
    expect(wrong).toEqual([]);
    expect(shown).toContain(`Exchange: Question ${x}`);
    expect(shown).toContain("↳ replying to supervisor");
  });
});
