// The example page in Chromium (Debian's, driven by playwright-core)
// against the real parley binary: a question asked with useChat, the page
// reloaded mid-answer, and the answer shown once, going on where it was.

import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { Runner, browserFixture } from "./servers.js";

const f = browserFixture();

declare global {
  interface Window {
    /** Every text the page showed for the answer, in order, and the most answers shown at once. */
    __seen: { texts: string[]; most: number };
  }
}

/** Records, at every change of the page, what it shows of the answers. */
function record(): void {
  window.__seen = { texts: [], most: 0 };
  const read = () => {
    const answers = document.querySelectorAll('[data-role="assistant"]');
    window.__seen.most = Math.max(window.__seen.most, answers.length);
    const text = [...(answers[0]?.querySelectorAll(".text") ?? [])].map((t) => t.textContent ?? "").join("");
    const texts = window.__seen.texts;
    if (text && texts[texts.length - 1] !== text) texts.push(text);
  };
  new MutationObserver(read).observe(document, { subtree: true, childList: true, characterData: true });
}

const answerText = (p: Page) => p.locator('[data-role="assistant"] .text').allTextContents().then((t) => t.join(""));

test("a reload mid-answer shows the answer once, and it goes on", async () => {
  const chat = "chat-e2e";
  const api = "http://" + f.parley.addr;
  const made = await fetch(api + "/v1/conversations", {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify({ id: chat, participants: ["helper"], members: ["you"] }),
  });
  expect(made.status).toBe(201);
  const run = await Runner.attach(f.parley.addr, chat);
  const context = await f.browser.newContext();
  await context.addInitScript(record);
  const p = await context.newPage();
  const errors: string[] = [];
  p.on("pageerror", (e) => errors.push(e.message));

  await p.goto(`${f.page.url}/?chat=${chat}`);
  await p.getByLabel("Question").fill("What is 6 x 7?");
  await p.getByRole("button", { name: "Send" }).click();
  expect((await run.next())["content"]).toBe("What is 6 x 7?");
  await run.send({ type: "message.create", turnId: "r1" });
  await run.send({ type: "message.part.text-delta", turnId: "r1", delta: "Let me think. " });
  await run.send({ type: "message.part.text-delta", turnId: "r1", delta: "Six sevens are " });
  await p.locator('[data-message-id="r1"]').getByText("Let me think. Six sevens are").waitFor();

  await p.reload(); // mid-answer: the page goes, the answer goes on
  await p.locator('[data-message-id="r1"]').getByText("Let me think. Six sevens are").waitFor();
  await run.send({ type: "message.part.tool-update", turnId: "r1", callId: "c1", toolName: "calculator", status: "running", args: { expr: "6*7" } });
  await run.send({ type: "message.part.tool-update", turnId: "r1", callId: "c1", toolName: "calculator", status: "completed", result: 42 });
  await run.send({ type: "message.part.text-delta", turnId: "r1", delta: "42." });
  await run.send({ type: "message.finalize", turnId: "r1", reason: "end_turn" });
  await run.send({ type: "complete" });
  await p.locator('[data-status="ready"]').waitFor();
  await p.locator('[data-message-id="r1"]').getByText("calculator: output-available").waitFor();

  const stored = (await (await fetch(`${api}/v1/conversations/${chat}/messages/r1`)).json()) as { content: string };
  const seen = await p.evaluate(() => window.__seen);
  expect(stored.content).toBe("Let me think. Six sevens are 42.");
  expect(await answerText(p)).toBe(stored.content);
  expect(seen.most).toBe(1); // one answer on the page, never two
  // After the reload the page showed the answer growing, never a text that
  // is not the start of the stored one (as a duplicated part would be).
  expect(seen.texts.length).toBeGreaterThan(0);
  for (const t of seen.texts) expect(stored.content.startsWith(t), `the page showed ${JSON.stringify(t)}`).toBe(true);
  expect(await p.locator('[data-role="user"]').count()).toBe(1);
  await p.screenshot({ path: process.env["PARLEY_SCREENSHOTS"] ? `${process.env["PARLEY_SCREENSHOTS"]}/example-chat.png` : "/tmp/example-chat.png" });
  expect(errors).toEqual([]);
  run.close();
  await context.close();
});
