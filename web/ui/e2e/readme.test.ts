// The README's screenshot (docs/screenshot.png), made the same way each
// time: a fresh `parley demo`, one question asked in the prompt box, and,
// once the demo answered all of it, the conversation at 1280×800 with the
// answer's tool card open beside the flow picture. It lands in
// e2e/screenshots/readme.png; `npm run screenshot:readme` copies it over
// docs/screenshot.png.

import { describe, expect, it } from "vitest";
import { demoPerFile, isIdle, until } from "./lib/demo.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

const demo = demoPerFile();
const browser = browserPerFile();

describe("the README's screenshot", () => {
  it("shows the demo's conversation: an answer with its tool card, the worker, the reviewer's reply and the flow", async () => {
    await demo.idle(); // the scripted person's first question, answered
    const { page } = await browser.open({ viewport: { width: 1280, height: 800 }, deviceScaleFactor: 1 });
    await page.goto(`${demo.server.url}/c/${demo.conversationId}`);
    await page.getByRole("status", { name: "Connection: live" }).waitFor();
    const box = page.getByRole("textbox", { name: "Prompt" });
    await box.fill("What is the capital of Australia?");
    await box.press("Enter");
    await expect.poll(() => box.inputValue()).toBe("");
    await until(async () => !(await isIdle(demo.api, demo.conversationId))); // answering it
    await demo.idle();
    // The answer to it, its worker's check and the reviewer's reply, all on the page.
    const answer = page.getByRole("article", { name: "Message from supervisor" }).last();
    await expect.poll(() => answer.getAttribute("data-status")).toBe("complete");
    await expect.poll(() => answer.locator(".msg-body .md").last().textContent()).toContain("The answer is Canberra.");
    const review = page.getByRole("article", { name: "Message from reviewer" }).last();
    await expect.poll(() => review.getAttribute("data-status")).toBe("complete");
    await page.getByRole("article", { name: "Message from worker, delegated by supervisor" }).last().waitFor();
    await answer.getByRole("button", { name: "search, completed" }).click();
    await answer.locator(".tool-body").waitFor();
    await page.getByRole("group", { name: "Flow of the conversation" }).waitFor();
    // At the end of the messages, where the page follows the conversation.
    const list = page.getByRole("log", { name: "Messages" });
    await list.evaluate((el) => el.scrollTo({ top: el.scrollHeight }));
    await page.evaluate(() => new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r))));
    await page.mouse.move(0, 0); // no hover on what is drawn
    await screenshot(page, "readme");
  });
});
