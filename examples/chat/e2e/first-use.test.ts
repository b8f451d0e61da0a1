// The example page's first use, in Chromium against the real parley
// binary: a chat that does not exist yet is made by the page's first
// question (POST /v1/chat), answered by an agent-wide runner of helper
// (one connection for every chat, since a new chat has no runner of its
// own); and an answer whose runner fails over shows as one answer, live
// and after a reload.

import type { Page } from "playwright-core";
import { expect, test } from "vitest";
import { Runner, browserFixture } from "./servers.js";

const f = browserFixture();

/** The text of each answer on the page, by message id. */
const answers = (p: Page) =>
  p.locator('[data-role="assistant"]').evaluateAll((els) => els.map((e) => [e.getAttribute("data-message-id"), [...e.querySelectorAll(".text")].map((t) => t.textContent).join("")]));

async function ask(p: Page, run: Runner, text: string): Promise<void> {
  await p.getByLabel("Question").fill(text);
  await p.getByRole("button", { name: "Send" }).click();
  expect(await run.next()).toMatchObject({ type: "prompt", content: text });
}

test("the first question makes the chat; a failover shows as one answer, live and after a reload", async () => {
  const chat = "chat-first-use";
  const api = "http://" + f.parley.addr;
  expect((await fetch(`${api}/v1/conversations/${chat}`)).status).toBe(404); // no chat yet
  const run = await Runner.attachAgent(f.parley.addr);
  const context = await f.browser.newContext();
  const p = await context.newPage();
  const errors: string[] = [];
  p.on("pageerror", (e) => errors.push(e.message));

  // The page asks to resume the chat (useChat's resume) as it loads: a chat
  // not made yet has nothing to resume, which is no error.
  const resumed = p.waitForResponse((r) => r.url().endsWith(`/v1/chat/${chat}/stream`));
  await p.goto(`${f.page.url}/?chat=${chat}`);
  expect((await resumed).status()).toBe(204);
  await p.locator('[data-status="ready"]').waitFor();
  expect(await p.getByRole("alert").count()).toBe(0);
  await ask(p, run, "What is 6 x 7?");
  const made = (await (await fetch(`${api}/v1/conversations/${chat}`)).json()) as { conversation: { participants: string[]; members: string[] } };
  expect(made.conversation).toMatchObject({ participants: ["helper"], members: ["you"] });
  await run.send({ type: "message.create", turnId: "r1" });
  await run.send({ type: "message.part.text-delta", turnId: "r1", delta: "It is 42." });
  await run.send({ type: "message.finalize", turnId: "r1", reason: "end_turn" });
  await run.send({ type: "complete" });
  await p.locator('[data-message-id="r1"]').getByText("It is 42.").waitFor();
  await p.locator('[data-status="ready"]').waitFor();

  // The runner fails over mid-answer and answers again in a retry.
  await ask(p, run, "And 7 x 8?");
  await run.send({ type: "message.create", turnId: "r2" });
  await run.send({ type: "message.part.text-delta", turnId: "r2", delta: "Let me see. " });
  await p.locator('[data-message-id="r2"]').getByText("Let me see.").waitFor();
  await run.send({ type: "error", turnId: "r2", error: "the model's connection dropped", finality: "none" });
  await run.send({ type: "message.create", turnId: "r3", retryOf: "r2" });
  await run.send({ type: "message.part.text-delta", turnId: "r3", delta: "It is 56." });
  await run.send({ type: "message.finalize", turnId: "r3", reason: "end_turn" });
  await run.send({ type: "complete" });
  await p.locator('[data-message-id="r2"]').getByText("It is 56.").waitFor();
  await p.locator('[data-status="ready"]').waitFor();
  const want = [
    ["r1", "It is 42."],
    ["r2", "Let me see. It is 56."],
  ];
  expect(await answers(p)).toEqual(want);
  expect(await p.getByRole("alert").count()).toBe(0); // no error shown

  await p.reload(); // the page reads the chat back: the same answers
  await p.locator('[data-message-id="r2"]').getByText("It is 56.").waitFor();
  expect(await answers(p)).toEqual(want);
  expect(await p.locator('[data-role="user"]').count()).toBe(2);
  expect(errors).toEqual([]);
  run.close();
  await context.close();
});

test("a question no runner can take says so, until one connects and answers", async () => {
  const chat = "chat-no-runner";
  const context = await f.browser.newContext();
  const p = await context.newPage();
  await p.goto(`${f.page.url}/?chat=${chat}`);
  await p.locator('[data-status="ready"]').waitFor();
  await p.getByLabel("Question").fill("Is anyone there?");
  await p.getByRole("button", { name: "Send" }).click();
  await p.getByRole("status").getByText("Waiting for a runner of helper to connect…").waitFor();

  const run = await Runner.attachAgent(f.parley.addr);
  expect(await run.next()).toMatchObject({ type: "prompt", content: "Is anyone there?" });
  await run.send({ type: "message.create", turnId: "n1" });
  await run.send({ type: "message.part.text-delta", turnId: "n1", delta: "I am now." });
  await run.send({ type: "message.finalize", turnId: "n1", reason: "end_turn" });
  await run.send({ type: "complete" });
  await p.locator('[data-message-id="n1"]').getByText("I am now.").waitFor();
  await p.locator('[data-status="ready"]').waitFor();
  expect(await p.getByText("Waiting for a runner").count()).toBe(0);
  run.close();
  await context.close();
});
