// The demo's scene in Chromium: what `parley demo` shows besides a streamed
// answer (demo.test.ts has those): a failover's failed attempt marked
// retried with its error banner, the note nobody answered, the worker
// nested under the supervisor's turn, the reviewer's claims (and the
// scribe's) and the supervisor's resets in the flow picture, a block of it jumping to its
// messages; and driving it: a steer from the composer, and the composer
// used with the keyboard alone. Each check is on what the server holds.

import { ParleyClient, type Message, type ParleyEvent } from "@parleyhq/client";
import type { Locator, Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import type { Server } from "../../client/test/server.js";
import { startDemo } from "./lib/demo.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;
let conversationId: string;

beforeAll(async () => {
  ({ server, conversationId } = await startDemo(inject("parleyBinary")));
  api = new ParleyClient({ baseUrl: server.url });
  await idle();
  // The demo fails over on every 4th answer (and resets its turn before the
  // retry), and its reviewer claims its turn on every other one: ask until
  // the log holds a failover, a reset and a claim.
  for (let i = 0; i < 6; i++) {
    const types = new Set((await allEvents()).map((e) => e.type));
    const retried = (await messages()).some((m) => m.retryOf);
    if (retried && types.has("turn.reset") && (await allEvents()).some((e) => claimOf(e, "reviewer"))) return;
    await api.prompt(conversationId, { agentId: "human", content: `What is the capital of Australia? (setup ${i})` });
    await idle();
  }
  throw new Error("the demo showed no failover, reset and claim after six answers");
});

afterAll(async () => {
  await server?.stop();
});

async function until(ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`not so within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until the demo answers nothing: no prompt queued, no turn open, no claim held, the scribe's turn taken. */
async function idle(): Promise<void> {
  await until(async () => {
    const [q, v] = await Promise.all([api.prompts(conversationId), api.conversation(conversationId)]);
    return q.length === 0 && !v.head.openTurn && !v.head.claim && v.guidance?.nextAgentId !== "scribe";
  }, 30_000);
}

/** Whether e is a claim of agent's. */
const claimOf = (e: ParleyEvent, agent: string): boolean => e.type === "turn.claimed" && (e.data as { agentId: string }).agentId === agent;

async function messages(): Promise<Message[]> {
  const out: Message[] = [];
  for await (const m of api.allMessages(conversationId)) out.push(m);
  return out;
}

async function allEvents(): Promise<ParleyEvent[]> {
  const out: ParleyEvent[] = [];
  for (let after = 0; ; ) {
    const page = await api.events(conversationId, { after, limit: 1000 });
    out.push(...page.events);
    if (page.nextAfter === undefined || page.events.length === 0) return out;
    after = page.events[page.events.length - 1]!.seq;
  }
}

/** Opens the demo's conversation, at message `at` if given (`?m=`). */
async function openDemo(at?: string): Promise<Page> {
  const { page } = await browser.open();
  await page.goto(`${server.url}/c/${conversationId}${at ? `?m=${encodeURIComponent(at)}` : ""}`);
  await page.getByRole("status", { name: "Connection: live" }).waitFor();
  await page.getByRole("article").first().waitFor();
  return page;
}

function article(page: Page, id: string): Locator {
  return page.locator(`article[data-message-id="${id}"]`);
}

/** Whether the element is inside the visible part of the message list. */
async function inView(page: Page, el: Locator): Promise<boolean> {
  if ((await el.count()) === 0) return false;
  const [box, list] = await Promise.all([el.boundingBox(), page.getByRole("log", { name: "Messages" }).boundingBox()]);
  return box !== null && list !== null && box.y < list.y + list.height && box.y + box.height > list.y;
}

/** Whether the element holds the keyboard's focus (itself or something in it). */
function focused(el: Locator): Promise<boolean> {
  return el.evaluate((e) => e === document.activeElement || e.contains(document.activeElement));
}

describe("the demo's scene in a browser", () => {
  it("marks a failover's failed attempt retried, with its error banner, and its retry links back to it", async () => {
    const all = await messages();
    const retry = all.find((m) => m.retryOf)!;
    const failed = all.find((m) => m.id === retry.retryOf)!;
    expect(failed.status).toBe("error");
    const reason = failed.parts.find((p) => p.type === "error")!.message!;
    expect(reason).toContain("the model's connection dropped");

    const page = await openDemo(retry.id);
    const attempt = article(page, failed.id);
    await attempt.waitFor();
    expect(await attempt.getAttribute("data-status")).toBe("error");
    expect(await attempt.locator(".mark-retried").allTextContents()).toEqual(["retried"]);
    const banner = attempt.getByRole("note");
    expect(await banner.count()).toBe(1);
    expect((await banner.textContent())?.replace(/\s+/g, " ").trim()).toBe(`Error: ${reason}`);
    // The retry is not marked so: it completed.
    const answer = article(page, retry.id);
    expect(await answer.getAttribute("data-status")).toBe("complete");
    expect(await answer.locator(".mark-retried").count()).toBe(0);
    expect(await answer.getByRole("note").count()).toBe(0);
    // Nor is any other message on the page: only attempts that another message names in retryOf.
    const named = new Set(all.flatMap((m) => (m.retryOf ? [m.retryOf] : [])));
    const onPage = await page.locator("article").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
    const marked = await page.locator("article:has(.mark-retried)").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
    expect(marked).toContain(failed.id);
    expect(marked).toEqual(onPage.filter((id) => named.has(id)));
    await screenshot(page, "failover");
    // "retry of supervisor" jumps to the failed attempt.
    await answer.getByRole("button", { name: "retry of supervisor" }).click();
    await expect.poll(() => attempt.getAttribute("class")).toContain("highlighted");
    await expect.poll(() => focused(attempt)).toBe(true);
  });

  it("nests the worker's message under the turn of the supervisor that delegated to it", async () => {
    const all = await messages();
    const worker = all.filter((m) => m.agentId === "worker").at(-1)!;
    const answer = all.find((m) => m.agentId === "supervisor" && m.turn === worker.turn && m.status === "complete")!;
    expect(answer.turnId).toBe(worker.turnId);
    const page = await openDemo(worker.id);
    const w = article(page, worker.id);
    const a = article(page, answer.id);
    await w.waitFor();
    await a.waitFor();
    expect(await w.getAttribute("aria-label")).toBe("Message from worker, delegated by supervisor");
    expect(await w.locator(".mark-delegate").allTextContents()).toEqual(["worker of supervisor"]);
    expect(await a.getAttribute("aria-label")).toBe("Message from supervisor");
    // The same turn's header is above both, with nothing between: the
    // worker's message is in the supervisor's turn, not one of its own.
    const headOf = (el: Locator) =>
      el.evaluate((e) => {
        const rows = [...document.querySelectorAll(".messages-inner .row")].sort((x, y) => Number(x.getAttribute("data-index")) - Number(y.getAttribute("data-index")));
        const i = rows.findIndex((r) => r.contains(e));
        for (let j = i; j >= 0; j--) {
          const h = rows[j]!.querySelector(".turn-head, .exchange-toggle");
          if (h) return (h.getAttribute("aria-label") ?? h.textContent ?? "").replace(/\s+/g, " ").trim();
        }
        return "";
      });
    const turnHead = `Turn ${answer.turn} · supervisor · delegated to worker`;
    expect(await headOf(w)).toBe(turnHead);
    expect(await headOf(a)).toBe(turnHead);
    // Indented under it.
    const [wb, ab] = [(await w.boundingBox())!, (await a.boundingBox())!];
    expect(wb.x).toBeGreaterThan(ab.x + 8);
    await screenshot(page, "worker-nested");
  });

  it("marks the note nobody answered [in-memory, no reply], and unmarks it once a reply names it", async () => {
    const all = await messages();
    const note = all.find((m) => m.agentId === "human" && m.content.startsWith("Heads-up"))!;
    const asked = all.find((m) => m.agentId === "human" && m.role === "user" && m.id !== note.id)!;
    expect(all.some((m) => m.replyTo === asked.id)).toBe(true); // answered by the supervisor
    const page = await openDemo(note.id);
    const n = article(page, note.id);
    await n.waitFor();
    await expect.poll(() => n.locator(".mark-noreply").allTextContents()).toEqual(["[in-memory, no reply]"]);
    await article(page, asked.id).waitFor();
    expect(await article(page, asked.id).locator(".mark-noreply").count()).toBe(0);
    // Only the demo's notes are so marked (it posts another every 9th answer), as in the Markdown export.
    const notes = new Set(all.filter((m) => m.content.startsWith("Heads-up")).map((m) => m.id));
    const onPage = await page.locator("article").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
    const marked = await page.locator("article:has(.mark-noreply)").evaluateAll((els) => els.map((e) => e.getAttribute("data-message-id") ?? ""));
    expect(marked).toContain(note.id);
    expect(marked).toEqual(onPage.filter((id) => notes.has(id)));
    expect(await api.exportText(conversationId, "markdown")).toMatch(/From: HUMAN · To: supervisor \[in-memory, no reply\]/);
    // A reply to it (from the person in the UI) ends the mark, live.
    await idle();
    await api.postMessage(conversationId, { agentId: "you", role: "user", replyTo: note.id, content: "Noted, thanks.", finality: "turn" });
    await expect.poll(() => n.locator(".mark-noreply").count()).toBe(0);
    await expect.poll(() => n.getByRole("button", { name: "you" }).count()).toBe(1); // its replies: 1 reply: you
  });

  it("marks the reviewer's claims and the supervisor's resets in the flow picture, on their lanes", async () => {
    const log = await allEvents();
    const claims = log.filter((e) => e.type === "turn.claimed");
    const resets = log.filter((e) => e.type === "turn.reset");
    expect(claims.length).toBeGreaterThan(0);
    expect(resets.length).toBeGreaterThan(0);
    const page = await openDemo();
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    await flow.waitFor();
    const marks = (kind: string) =>
      flow.locator(`.flow-mark.mark-${kind}`).evaluateAll((els) =>
        els.map((e) => {
          const r = e.getBoundingClientRect();
          return { title: e.querySelector("title")?.textContent ?? "", x: r.x + r.width / 2, y: r.y + r.height / 2 };
        }),
      );
    const want = {
      claim: claims.map((e) => `${(e.data as { agentId: string }).agentId} claimed turn ${(e.data as { turn: number }).turn}`),
      reset: resets.map((e) => `turn ${e.turn} reset by ${e.agentId}`),
    };
    // The reviewer's, and the scribe's (it claims each turn it takes through MCP).
    expect(want.claim.some((t) => t.startsWith("reviewer claimed turn "))).toBe(true);
    expect(want.claim.every((t) => /^(reviewer|scribe) claimed turn /.test(t))).toBe(true);
    expect(want.reset.every((t) => t.endsWith(" reset by supervisor"))).toBe(true);
    await expect.poll(async () => (await marks("claim")).map((m) => m.title)).toEqual(want.claim);
    await expect.poll(async () => (await marks("reset")).map((m) => m.title)).toEqual(want.reset);
    // Each on its agent's lane (a mark sits 20 px right of the lane's line).
    const lanes = await page.locator(".flow-lanes text").evaluateAll((els) =>
      Object.fromEntries(els.map((e) => [e.textContent ?? "", e.getBoundingClientRect().x + e.getBoundingClientRect().width / 2])),
    );
    for (const m of await marks("claim")) expect(Math.abs(m.x - 20 - lanes[m.title.split(" ")[0]!]!)).toBeLessThan(3);
    for (const m of await marks("reset")) expect(Math.abs(m.x - 20 - lanes["supervisor"]!)).toBeLessThan(3);
    // A reset sits inside the block of the supervisor's turn it reset: between the failed attempt and the retry.
    const reset = (await marks("reset"))[0]!;
    const block = (await flow.getByRole("button", { name: new RegExp(`^Turn ${resets[0]!.turn} · supervisor · `) }).boundingBox())!;
    expect(reset.y).toBeGreaterThan(block.y);
    expect(reset.y).toBeLessThan(block.y + block.height);
    await flow.scrollIntoViewIfNeeded();
    await screenshot(page, "flow-marks");
  });

  it("draws the supervisor's delegations and every reply between agents as arrows of the flow picture, lane to lane", async () => {
    // What the log says: each delegation, and each message that replies to another agent's.
    const log = await allEvents();
    const author = new Map<string, string>();
    const want: { kind: "delegation" | "reply"; title: string; from: string; to: string; seq: number; turn: number }[] = [];
    for (const e of log) {
      if (e.type === "delegation") {
        const d = e.data;
        const from = d.from || e.agentId!;
        want.push({ kind: "delegation", title: `${from} delegated to ${d.to}`, from, to: d.to, seq: e.seq, turn: d.turn });
      } else if (e.type === "message") {
        const m = e.data;
        author.set(m.id, m.agentId);
        const parent = m.replyTo ? author.get(m.replyTo) : undefined;
        if (parent !== undefined && parent !== m.agentId) want.push({ kind: "reply", title: `${m.agentId} replied to ${parent}`, from: parent, to: m.agentId, seq: e.seq, turn: m.turn });
      }
    }
    expect(want.filter((a) => a.title === "supervisor delegated to worker").length).toBeGreaterThan(0);
    expect(want.filter((a) => a.title === "reviewer replied to supervisor").length).toBeGreaterThan(0);

    const page = await openDemo();
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    await flow.waitFor();
    expect(await page.locator(".flow-earlier").count(), "the picture holds the whole log").toBe(0);
    // What the picture draws, in its own units: each arrow's title, ends and style; each lane's x; each block's span.
    const drawn = () =>
      flow.evaluate((svg) => {
        const arrows = [...svg.querySelectorAll<SVGPathElement>("path.arrow")].map((p) => {
          const a = p.getPointAtLength(0);
          const b = p.getPointAtLength(p.getTotalLength());
          return {
            kind: p.classList.contains("arrow-delegation") ? "delegation" : "reply",
            title: p.querySelector("title")?.textContent ?? "",
            x0: a.x, y0: a.y, x1: b.x, y1: b.y,
            marker: p.getAttribute("marker-end") ?? "",
            dashed: getComputedStyle(p).strokeDasharray !== "none",
          };
        });
        const blocks = [...svg.querySelectorAll("g.block")].map((g) => {
          const r = g.querySelector("rect")!;
          return { title: g.querySelector("title")?.textContent ?? "", y0: Number(r.getAttribute("y")), y1: Number(r.getAttribute("y")) + Number(r.getAttribute("height")) };
        });
        const lanes = Object.fromEntries([...svg.querySelectorAll<SVGLineElement>("line.lane-line")].map((l) => [l.querySelector("title")?.textContent ?? "", Number(l.getAttribute("x1"))]));
        return { arrows, blocks, lanes };
      });
    await expect.poll(async () => (await drawn()).arrows.map((a) => `${a.kind}: ${a.title}`)).toEqual(want.map((a) => `${a.kind}: ${a.title}`));
    const { arrows, blocks, lanes } = await drawn();
    const near = (a: number, b: number) => Math.abs(a - b) < 1;
    const blocksOf = (turn: number, agent: string) => blocks.filter((b) => b.title.startsWith(`Turn ${turn} · ${agent}`));
    want.forEach((w, i) => {
      const a = arrows[i]!;
      const what = `${w.title} (seq ${w.seq})`;
      const [x0, x1] = [lanes[w.from]!, lanes[w.to]!];
      const dir = x1 >= x0 ? 1 : -1;
      // From beside its agent's lane to beside the other's, with its own arrowhead.
      expect(near(a.x0, x0 + dir * 16), `${what} starts at ${a.x0}, the lane of ${w.from} at ${x0}`).toBe(true);
      expect(near(a.x1, x1 - dir * (w.kind === "delegation" ? 12 : 16)), `${what} ends at ${a.x1}, the lane of ${w.to} at ${x1}`).toBe(true);
      expect(a.marker).toBe(`url(#arrow-${w.kind})`);
      if (w.kind === "delegation") {
        // Across, dashed, after the delegating agent's block of the turn began and before its worker's.
        expect(a.dashed, what).toBe(true);
        expect(a.y0, what).toBe(a.y1);
        expect(blocksOf(w.turn, w.from).some((b) => b.y0 < a.y0), `${what}: no block of ${w.from} in turn ${w.turn} above it`).toBe(true);
        expect(blocksOf(w.turn, w.to).some((b) => b.y0 > a.y0), `${what}: no block of ${w.to} in turn ${w.turn} below it`).toBe(true);
      } else {
        // Down from the parent to the reply, which is in its author's block.
        expect(a.dashed, what).toBe(false);
        expect(a.y1, what).toBeGreaterThan(a.y0);
        expect(blocksOf(w.turn, w.to).some((b) => b.y0 <= a.y1 && a.y1 <= b.y1), `${what}: no block of ${w.to} in turn ${w.turn} at its end`).toBe(true);
      }
    });
    await flow.scrollIntoViewIfNeeded();
    await screenshot(page, "flow-arrows");
  });

  it("jumps from a block of the flow picture to its turn's first message, by click and by keyboard", async () => {
    const all = await messages();
    const firstAnswer = all.find((m) => m.agentId === "supervisor")!;
    const lastReview = all.filter((m) => m.agentId === "reviewer").at(-1)!;
    const page = await openDemo();
    const flow = page.getByRole("group", { name: "Flow of the conversation" });
    // The page opens at the end: the first answer is out of view.
    await article(page, lastReview.id).waitFor();
    expect(await inView(page, article(page, firstAnswer.id))).toBe(false);
    await flow.getByRole("button", { name: `Turn ${firstAnswer.turn} · supervisor · closed` }).click();
    const target = article(page, firstAnswer.id);
    await expect.poll(() => inView(page, target)).toBe(true);
    await expect.poll(() => target.getAttribute("class")).toContain("highlighted");
    await expect.poll(() => focused(target)).toBe(true);
    // Now the last review is out of view; Enter on its block brings it back.
    await expect.poll(() => inView(page, article(page, lastReview.id))).toBe(false);
    const block = flow.getByRole("button", { name: `Turn ${lastReview.turn} · reviewer · closed` });
    await block.focus();
    await page.keyboard.press("Enter");
    const review = article(page, lastReview.id);
    await expect.poll(() => inView(page, review)).toBe(true);
    await expect.poll(() => review.getAttribute("class")).toContain("highlighted");
    await expect.poll(() => focused(review)).toBe(true);
  });

  it("shows the reviewer's claim in the head while it holds it, and whose turn that makes it", async () => {
    await idle();
    const page = await openDemo();
    // Every text the head's Next and Claim showed, recorded at each change of the page.
    await page.evaluate(() => {
      const seen: string[] = [];
      (window as unknown as { __heads: string[] }).__heads = seen;
      const read = () => {
        const t = [...document.querySelectorAll(".conv-head .facts > div")]
          .map((d) => `${d.querySelector("dt")?.textContent ?? ""}: ${(d.querySelector("dd")?.textContent ?? "").replace(/\s+/g, " ").trim()}`)
          .filter((x) => x.startsWith("Next:") || x.startsWith("Claim:"))
          .join(" / ");
        if (seen[seen.length - 1] !== t) seen.push(t);
      };
      new MutationObserver(read).observe(document.body, { subtree: true, childList: true, characterData: true });
      read();
    });
    const claims = async () => (await allEvents()).filter((e) => claimOf(e, "reviewer"));
    const before = (await claims()).length;
    const box = page.getByRole("textbox", { name: "Prompt" });
    // The reviewer claims on every other answer: one of two questions is reviewed so.
    for (let i = 0; i < 2 && (await claims()).length === before; i++) {
      await box.fill(`Which planet is the largest? (claim ${i})`);
      await box.press("Enter");
      await expect.poll(() => box.inputValue()).toBe("");
      await idle();
    }
    const claim = (await claims())[before];
    expect(claim, "no claim in two answers").toBeDefined();
    const turn = (claim!.data as { turn: number }).turn;
    const heads = () => page.evaluate(() => (window as unknown as { __heads: string[] }).__heads);
    const shown = await heads();
    expect(shown.some((h) => h.startsWith(`Next: reviewer starts turn ${turn} / Claim: reviewer claims turn ${turn} until `)), shown.join("\n")).toBe(true);
    // The review that used it ended it (once the page read the head again).
    await expect.poll(async () => (await heads()).at(-1)).toMatch(/ \/ Claim: none$/);
  });

  it("steers from the composer: the answer under way stops, and the steer is answered next", async () => {
    await idle();
    const page = await openDemo();
    const box = page.getByRole("textbox", { name: "Prompt" });
    await box.fill("Which planet is the largest? (to be steered past)");
    await box.press("Enter");
    await expect.poll(() => box.inputValue()).toBe("");
    // Its answer streams.
    let first: Message | undefined;
    await until(async () => {
      const all = await messages();
      const asked = all.find((m) => m.content === "Which planet is the largest? (to be steered past)");
      first = all.find((m) => m.replyTo === asked?.id && m.id.startsWith("answer-") && m.status === "streaming");
      return first !== undefined;
    });
    await expect.poll(() => article(page, first!.id).getAttribute("data-status")).toBe("streaming");
    await page.getByRole("combobox", { name: "When" }).selectOption({ label: "Interrupt" });
    await box.fill("What is 17 times 23? (a steer)");
    await box.press("Enter");
    await expect.poll(() => box.inputValue()).toBe("");
    // The first answer ends canceled, marked stopped; its prompt was aborted by the steer.
    await expect.poll(async () => (await api.message(conversationId, first!.id)).status, { timeout: 15_000 }).toBe("canceled");
    await expect.poll(() => article(page, first!.id).locator(".mark-stopped").allTextContents()).toEqual(["stopped"]);
    const log = await allEvents();
    const steer = log.find((e) => e.type === "prompt.queued" && (e.data as { content?: string }).content === "What is 17 times 23? (a steer)")!;
    expect((steer.data as { mode?: string }).mode).toBe("steer");
    expect(log.some((e) => e.type === "prompt.aborted" && (e.data as { id: string }).id === first!.replyTo && (e.data as { reason?: string }).reason === "steered")).toBe(true);
    // The steer's answer completes, on the page too.
    let second: Message | undefined;
    await until(async () => {
      second = (await messages()).find((m) => m.replyTo === (steer.data as { id: string }).id && m.id.startsWith("answer-") && m.status === "complete");
      return second !== undefined;
    }, 30_000);
    await expect.poll(() => article(page, second!.id).getAttribute("data-status")).toBe("complete");
    await expect.poll(() => article(page, second!.id).locator(".msg-body .md").last().textContent()).toContain("The answer is 391.");
    await idle();
  });

  it("is usable with the keyboard alone: Tab reaches the prompt box, Shift+Enter breaks a line, Enter sends", async () => {
    await idle();
    const page = await openDemo();
    // From the top of the page, Tab after Tab, as a keyboard user goes.
    await page.evaluate(() => (document.activeElement as HTMLElement | null)?.blur());
    const stops: string[] = [];
    for (let i = 0; i < 200; i++) {
      await page.keyboard.press("Tab");
      const at = await page.evaluate(() => {
        const e = document.activeElement;
        if (!e || e === document.body) return "";
        const name = e.getAttribute("aria-label") ?? (e.textContent ?? "").trim();
        return `${e.tagName.toLowerCase()} ${name.slice(0, 60)}`;
      });
      stops.push(at);
      if (at === "textarea Prompt") break;
    }
    expect(stops.at(-1), `the Tab stops: ${stops.join(" | ")}`).toBe("textarea Prompt");
    // Skip to content first; every stop on the way a control with a name.
    expect(stops[0]).toBe("a Skip to content");
    for (const s of stops) expect(s, `the Tab stops: ${stops.join(" | ")}`).toMatch(/^\S+ \S/);
    const ring = await page.evaluate(() => getComputedStyle(document.activeElement!).outlineStyle);
    expect(ring).not.toBe("none");
    await page.keyboard.type("What is the capital of Australia?");
    await page.keyboard.press("Shift+Enter");
    await page.keyboard.type("(typed with the keyboard alone)");
    const box = page.getByRole("textbox", { name: "Prompt" });
    const text = "What is the capital of Australia?\n(typed with the keyboard alone)";
    expect(await box.inputValue()).toBe(text);
    expect(await api.prompts(conversationId)).toEqual([]); // Shift+Enter sent nothing
    // What to send (a prompt) and whom to ask (any agent) are the next stops, then when it is
    // answered, which the arrow keys choose: Interrupt (steer).
    await page.keyboard.press("Tab");
    expect(await focused(page.getByRole("combobox", { name: "Send as" }))).toBe(true);
    await page.keyboard.press("Tab");
    expect(await focused(page.getByRole("combobox", { name: "Ask" }))).toBe(true);
    await page.keyboard.press("Tab");
    const mode = page.getByRole("combobox", { name: "When" });
    expect(await focused(mode)).toBe(true);
    await page.keyboard.press("ArrowDown");
    expect(await mode.inputValue()).toBe("steer");
    for (let i = 0; i < 3; i++) await page.keyboard.press("Shift+Tab");
    expect(await focused(box)).toBe(true);
    await page.keyboard.press("Enter");
    await expect.poll(() => box.inputValue()).toBe("");
    // The box keeps the focus, ready for the next prompt.
    expect(await focused(box)).toBe(true);
    const queued = (await allEvents()).find((e) => e.type === "prompt.queued" && (e.data as { content?: string }).content === text);
    expect(queued?.agentId).toBe("you");
    expect((queued?.data as { mode?: string } | undefined)?.mode).toBe("steer");
    const asked = () => messages().then((all) => all.find((m) => m.content === text));
    await until(async () => (await asked()) !== undefined);
    const prompt = (await asked())!;
    expect(prompt.agentId).toBe("you");
    expect(prompt.role).toBe("user");
    // It is answered, and the page shows the answer.
    let answer: Message | undefined;
    await until(async () => {
      answer = (await messages()).find((m) => m.replyTo === prompt.id && m.id.startsWith("answer-") && m.status === "complete");
      return answer !== undefined;
    }, 30_000);
    await expect.poll(() => article(page, answer!.id).locator(".msg-body .md").last().textContent()).toContain("The answer is Canberra.");
    await idle();
  });
});
