// The UI against a `parley serve` the test drives through the API, in
// Chromium: the head (whose turn, the open turn, a claim, the guidance,
// who takes part) following the log live, and the prompt queue driven from
// the composer (promote, withdraw, mode steer and collect). No runner is
// attached, so prompts wait in the queue for as long as the test looks at
// them; each check is on what the server holds.

import { ParleyClient, type QueuedPrompt } from "@parleyhq/client";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Runner } from "../../client/test/runner.js";
import { startServer, type Server } from "../../client/test/server.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;

beforeAll(async () => {
  // A collect window far longer than the two sends below take, however
  // loaded the machine: the merge is what they check, not how fast they are.
  server = await startServer(inject("parleyBinary"), { args: ["-collect-window", "1m"] });
  api = new ParleyClient({ baseUrl: server.url });
});

afterAll(async () => {
  await server?.stop();
});

/** The head's facts as the page shows them: each term (Next, Open turn, Claim, …) and its text. */
function facts(page: Page): Promise<Record<string, string>> {
  return page.evaluate(() =>
    Object.fromEntries(
      [...document.querySelectorAll(".conv-head .facts > div")].map((d) => [
        d.querySelector("dt")?.textContent ?? "",
        (d.querySelector("dd")?.textContent ?? "").replace(/\s+/g, " ").trim(),
      ]),
    ),
  );
}

/** Opens conversation id's page and waits until it is live. */
async function openConversation(id: string): Promise<Page> {
  const { page } = await browser.open();
  await page.goto(`${server.url}/c/${id}`);
  await page.getByRole("status", { name: "Connection: live" }).waitFor();
  return page;
}

/** The queue as the server holds it: each prompt's text and mode, in order. */
async function serverQueue(id: string): Promise<{ content: string; mode: string }[]> {
  const { prompts } = await api.promptQueue(id);
  return prompts.map((p: QueuedPrompt) => ({ content: p.content ?? "", mode: p.mode }));
}

/** The person's words for each mode, on the queue's badges. */
const BADGES: Record<string, string> = { followup: "in line", steer: "interrupts", collect: "merges", reject: "only if idle" };

/** The queue as the page shows it: each item's mode (by its badge's words) and text, in order. */
async function pageQueue(page: Page): Promise<{ content: string; mode: string }[]> {
  const shown = await page.evaluate(() =>
    [...document.querySelectorAll('[aria-label="Prompt queue"] li')].map((li) => ({
      content: li.querySelector(".queue-text")?.textContent ?? "",
      badge: li.querySelector(".badge")?.textContent ?? "",
    })),
  );
  return shown.map(({ content, badge }) => ({ content, mode: Object.keys(BADGES).find((m) => BADGES[m] === badge) ?? `unknown badge "${badge}"` }));
}

/** Types text into the prompt box and sends it with Enter; waits until the box is empty (the server took it). */
async function send(page: Page, text: string): Promise<void> {
  const box = page.getByRole("textbox", { name: "Prompt" });
  await box.fill(text);
  await box.press("Enter");
  await expect.poll(() => box.inputValue()).toBe("");
}

describe("the head and the queue of a conversation the test drives", () => {
  it("says whose turn it is, the open turn with its delegates and reset, a claim until it expires, and who takes part", async () => {
    const id = (await api.createConversation({ title: "Head test", participants: ["alice", "bob"], members: ["you"] })).conversation.id;
    const page = await openConversation(id);
    // The facts, with Events ("7 · turn 1": the log's length and last turn) checked against the server's head.
    const shown = async () => {
      const [f, v] = await Promise.all([facts(page), api.conversation(id)]);
      const server = `${v.head.lastSeq} · turn ${v.head.lastTurn}`;
      return { ...f, Events: f["Events"] === server ? "as the server's head" : `${f["Events"]}, the server's ${server}` };
    };
    const events = "as the server's head";
    await expect.poll(shown).toEqual({ Next: "alice starts turn 1", "Waits on": "nobody", "Open turn": "none", Claim: "none", Participants: "alice, bob (round-robin)", Members: "you", Runners: "none", Events: events });

    // alice opens turn 1, delegates to carol, and resets it: the head follows each.
    await api.postMessage(id, { agentId: "alice", content: "Working on it." });
    await expect.poll(shown).toMatchObject({ Next: "alice continues turn 1", "Waits on": "alice to end turn 1 (no runner)", "Open turn": "1 · alice", Events: events });
    await api.delegate(id, { agentId: "alice", to: "carol" });
    await expect.poll(() => facts(page)).toMatchObject({ "Open turn": "1 · alice (delegated to carol)" });
    await api.reset(id, { agentId: "alice" });
    await expect.poll(() => facts(page)).toMatchObject({ Next: "alice continues turn 1", "Open turn": "1 · alice (delegated to carol) · reset" });
    await screenshot(page, "head-open-turn");

    // alice closes it: round-robin names bob.
    await api.postMessage(id, { agentId: "alice", content: "Done.", finality: "turn" });
    await expect.poll(shown).toEqual({ Next: "bob starts turn 2", "Waits on": "nobody", "Open turn": "none", Claim: "none", Participants: "alice, bob (round-robin)", Members: "you", Runners: "none", Events: events });

    // alice claims turn 2: the guidance names her instead of bob while the claim holds.
    const claimed = await api.claim(id, { agentId: "alice", ttlMs: 3000 });
    const until = await page.evaluate(
      (iso) => new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit" }).format(new Date(iso)),
      claimed.claim!.expiresAt!,
    );
    await expect.poll(() => facts(page)).toMatchObject({ Next: "alice starts turn 2", "Waits on": "alice, who claimed turn 2", Claim: `alice claims turn 2 until ${until}` });
    await screenshot(page, "head-claim");
    // It expires (claim.expired): bob again, and no claim.
    await expect.poll(shown, { timeout: 10_000 }).toEqual({ Next: "bob starts turn 2", "Waits on": "nobody", "Open turn": "none", Claim: "none", Participants: "alice, bob (round-robin)", Members: "you", Runners: "none", Events: events });
    const types = (await api.events(id, { after: 0, limit: 100 })).events.map((e) => e.type);
    expect(types).toContain("claim.expired");

    // bob closes the conversation: nobody's turn, and the prompt box says so.
    await api.postMessage(id, { agentId: "bob", content: "That is all.", finality: "conversation" });
    await expect.poll(shown).toEqual({ Next: "The conversation is closed.", "Waits on": "nobody: closed", "Open turn": "none", Claim: "none", Participants: "alice, bob (round-robin)", Members: "you", Runners: "none", Events: events });
    const box = page.getByRole("textbox", { name: "Prompt" });
    await expect.poll(() => box.isDisabled()).toBe(true);
    expect(await box.getAttribute("placeholder")).toBe("The conversation is closed.");
  });

  it("jumps from a block of the flow picture to a message older than those the page holds", async () => {
    const id = (await api.createConversation({ title: "Long flow test", participants: ["alice", "bob"] })).conversation.id;
    // 300 turns: the stream's snapshot holds the latest 100 messages, the flow the whole log.
    const ids: string[] = [];
    for (let i = 1; i <= 300; i++) {
      const r = await api.postMessage(id, { agentId: i % 2 === 1 ? "alice" : "bob", content: `Message ${i}, which closes turn ${i}.`, finality: "turn" });
      ids.push(r.message.id);
    }
    const page = await openConversation(id);
    await page.locator(`article[data-message-id="${ids[299]}"]`).waitFor();
    const first = page.locator(`article[data-message-id="${ids[0]}"]`);
    expect(await first.count()).toBe(0);
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    await flow.getByRole("button", { name: "Turn 1 · alice · closed" }).click();
    await first.waitFor({ timeout: 15_000 });
    await expect.poll(() => first.getAttribute("class")).toContain("highlighted");
    await expect.poll(() => first.evaluate((e) => e === document.activeElement || e.contains(document.activeElement))).toBe(true);
    const inView = async () => {
      const [box, list] = [await first.boundingBox(), await page.getByRole("log", { name: "Messages" }).boundingBox()];
      return box !== null && list !== null && box.y >= list.y - 1 && box.y + box.height <= list.y + list.height + 1;
    };
    await expect.poll(inView, { timeout: 5000 }).toBe(true);
    expect(await first.textContent()).toContain("Message 1, which closes turn 1.");
    // And it stays there: the older messages read above it do not push it away.
    await new Promise((r) => setTimeout(r, 1500));
    expect(await inView()).toBe(true);
  });

  it("reads the older messages for a reader at the top though the first read failed", async () => {
    const id = (await api.createConversation({ title: "Older after a failure", participants: ["alice"] })).conversation.id;
    // 150 messages: the stream's snapshot holds the latest 100, the rest are read when the reader is at the top.
    for (let i = 1; i <= 150; i++) await api.postMessage(id, { agentId: "alice", content: `Older test message ${i}.` });
    const page = await openConversation(id);
    let reads = 0;
    await page.route(/\/messages\?after=/, (route) => {
      reads++;
      return reads === 1
        ? route.fulfill({ status: 503, contentType: "application/json", body: JSON.stringify({ error: { code: "unavailable", message: "try again" } }) })
        : route.continue();
    });
    const list = page.getByRole("log", { name: "Messages" });
    await page.locator("article").first().waitFor();
    // To the top, until the page asks for older messages: while the list first
    // lays out it keeps a reader who has not scrolled yet at the bottom, and
    // may undo a scroll made before its scroll event arrives.
    await expect
      .poll(async () => {
        if (reads === 0) await list.evaluate((el) => el.scrollTo({ top: 0 }));
        return reads;
      }, { timeout: 10_000 })
      .toBeGreaterThan(0);
    // No scroll event comes after the failed read: the page asks again by itself.
    await expect.poll(() => page.locator(".older-note").textContent(), { timeout: 15_000 }).toBe("The conversation starts here.");
    expect(reads).toBeGreaterThan(1);
    // What was read went above where the reader was, which stays in place: the first message is at the top.
    await list.evaluate((el) => el.scrollTo({ top: 0 }));
    await page.getByText("Older test message 1.", { exact: true }).waitFor();
  });

  it("queues prompts from the composer, and promotes and withdraws them", async () => {
    const id = (await api.createConversation({ title: "Queue test", participants: ["alice"], members: ["you"] })).conversation.id;
    const page = await openConversation(id);
    for (const t of ["first question", "second question", "third question"]) await send(page, t);
    const want = (...texts: string[]) => texts.map((content) => ({ content, mode: "followup" }));
    await expect.poll(() => serverQueue(id)).toEqual(want("first question", "second question", "third question"));
    await expect.poll(() => pageQueue(page)).toEqual(await serverQueue(id));
    const queue = page.getByRole("region", { name: "Prompt queue" });
    expect(await queue.getByRole("heading").textContent()).toBe("Queue 3 waiting");
    // The first waits at the front already: nothing to promote.
    expect(await queue.getByRole("button", { name: "Move to the front: first question" }).count()).toBe(0);
    // The prompts were queued as the person the page writes as.
    expect((await api.prompts(id)).map((p) => p.agentId)).toEqual(["you", "you", "you"]);

    await queue.getByRole("button", { name: "Move to the front: third question" }).click();
    await expect.poll(() => serverQueue(id)).toEqual(want("third question", "first question", "second question"));
    await expect.poll(() => pageQueue(page)).toEqual(want("third question", "first question", "second question"));
    expect(await queue.getByRole("button", { name: "Move to the front: third question" }).count()).toBe(0);
    expect(await queue.getByRole("button", { name: "Move to the front: first question" }).count()).toBe(1);

    await queue.getByRole("button", { name: "Withdraw: first question" }).click();
    await expect.poll(() => serverQueue(id)).toEqual(want("third question", "second question"));
    await expect.poll(() => pageQueue(page)).toEqual(want("third question", "second question"));
    await screenshot(page, "queue");
  });

  it("says whose runner is connected, and that a waiting prompt has none to answer it until one connects", async () => {
    const id = (await api.createConversation({ title: "Presence test", participants: ["alice"], members: ["you"] })).conversation.id;
    const page = await openConversation(id);
    const runners = page.locator(".fact-runners dd");
    await expect.poll(() => runners.textContent()).toBe("none");
    await send(page, "anyone there?");
    const queue = page.getByRole("region", { name: "Prompt queue" });
    await expect.poll(() => queue.locator(".queue-norunner").textContent()).toBe("no runner connected");
    const run = await Runner.connect(server.url, id, "alice");
    try {
      await expect.poll(() => runners.textContent()).toBe("alice");
      await expect.poll(() => run.pushes.some((p) => p["type"] === "prompt")).toBe(true);
      await expect.poll(() => queue.locator(".queue-norunner").count()).toBe(0);
      await expect.poll(() => queue.locator(".queue-who").textContent()).toBe("you → alice answering");
    } finally {
      run.close();
    }
    await expect.poll(() => runners.textContent()).toBe("none");
  });

  it("says whose open turn a waiting prompt waits for, until it ends", async () => {
    const id = (await api.createConversation({ title: "Turn wait test", participants: ["alice", "bob"], members: ["you"] })).conversation.id;
    // bob writes and keeps his turn open (finality none): a prompt waits for it.
    await api.postMessage(id, { agentId: "bob", content: "Still thinking." });
    const run = await Runner.connect(server.url, id, "alice");
    try {
      const page = await openConversation(id);
      await send(page, "alice, your view?");
      const queue = page.getByRole("region", { name: "Prompt queue" });
      await expect.poll(() => queue.locator(".queue-norunner").textContent()).toMatch(/^waits for bob's open turn \d+ to end$/);
      expect(run.pushes.some((p) => p["type"] === "prompt")).toBe(false);
      await api.postMessage(id, { agentId: "bob", content: "Done thinking.", finality: "turn" });
      await expect.poll(() => run.pushes.some((p) => p["type"] === "prompt")).toBe(true);
      await expect.poll(() => queue.locator(".queue-who").textContent()).toBe("you → alice answering");
      expect(await queue.locator(".queue-norunner").count()).toBe(0);
    } finally {
      run.close();
    }
  });

  it("sends a prompt in mode steer (first in the queue) and prompts in mode collect (merged into one)", async () => {
    const id = (await api.createConversation({ title: "Modes test", participants: ["alice"], members: ["you"] })).conversation.id;
    const page = await openConversation(id);
    const mode = page.getByRole("combobox", { name: "When" });
    await send(page, "waiting one");
    await send(page, "waiting two");
    await expect.poll(() => serverQueue(id)).toHaveLength(2);

    await mode.selectOption({ label: "Interrupt" });
    await send(page, "go first");
    const afterSteer = [
      { content: "go first", mode: "steer" },
      { content: "waiting one", mode: "followup" },
      { content: "waiting two", mode: "followup" },
    ];
    await expect.poll(() => serverQueue(id)).toEqual(afterSteer);
    await expect.poll(() => pageQueue(page)).toEqual(afterSteer);

    // Two collect prompts sent within the window (the server's is a minute) are one prompt, with both texts.
    await mode.selectOption({ label: "Merge" });
    await send(page, "collect this");
    await send(page, "and this");
    const afterCollect = [...afterSteer, { content: "collect this\n\nand this", mode: "collect" }];
    await expect.poll(() => serverQueue(id)).toEqual(afterCollect);
    // The page shows the merged prompt once, by its first line, the whole text in its tooltip.
    await expect.poll(() => pageQueue(page)).toEqual([...afterSteer, { content: "collect this", mode: "collect" }]);
    // Polled too: the first line is the same before the merge reaches the page.
    await expect.poll(() => page.locator('[aria-label="Prompt queue"] li .queue-text').last().getAttribute("title")).toBe("collect this\n\nand this");
    const log = (await api.events(id, { after: 0, limit: 100 })).events.filter((e) => e.type === "prompt.queued");
    expect(log.map((e) => (e.data as { mode?: string }).mode)).toEqual(["followup", "followup", "steer", "collect", "collect"]);
  });
});
