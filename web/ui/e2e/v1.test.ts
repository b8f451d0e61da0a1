// A conversation made with messageFormat v1 in Chromium, against a
// `parley serve` with a runner of the first protocol (stream, result,
// tool, complete frames) that the test drives: the page shows the streamed
// text as a streaming message of the agent while no message holds it (so
// does a page opened mid-answer), then the rows in its place, and a tool
// row as a tool card.

import { ParleyClient } from "@parleyhq/client";
import type { Locator, Page } from "playwright-core";
import { describe, expect, inject, it } from "vitest";
import { Runner } from "../../client/test/runner.js";
import { startServer } from "../../client/test/server.js";
import { browserPerFile, openPage, screenshot } from "./lib/browser.js";

const browser = browserPerFile();

/** Each message the page shows: its id ("~streaming~AGENT" for a streaming text), status, text and tool cards. */
function shown(page: Page): Promise<string[]> {
  return page.locator("article").evaluateAll((els) =>
    els.map((e) => {
      const text = [...e.querySelectorAll(".msg-body .md")].map((x) => x.textContent ?? "").join("").trim();
      const tools = [...e.querySelectorAll(".msg-body .tool-head")].map((x) => `[${(x.textContent ?? "").replace(/^[▸▾]/, "").replace(",", ", ")}]`).join("");
      return `${e.getAttribute("data-message-id") ?? ""} ${e.getAttribute("data-status") ?? ""}: ${text}${tools}`;
    }),
  );
}

function streamingOf(page: Page, agent: string): Locator {
  return page.locator(`article[data-message-id="~streaming~${agent}"]`);
}

describe("a v1 conversation", () => {
  it("shows a first-protocol runner's streamed text while it streams, then the rows that hold it", async () => {
    const server = await startServer(inject("parleyBinary"));
    const api = new ParleyClient({ baseUrl: server.url });
    const id = (await api.createConversation({ title: "Legacy runner", participants: ["alice"], members: ["human"], messageFormat: "v1" })).conversation.id;
    const run = await Runner.connect(server.url, id, "alice");
    try {
      const { page } = await browser.open();
      await page.goto(`${server.url}/c/${id}`);
      await page.getByRole("status", { name: "Connection: live" }).waitFor();
      await api.prompt(id, { agentId: "human", content: "Where is the report?" });
      await expect.poll(() => run.pushes.some((p) => p["type"] === "prompt")).toBe(true);
      const asked = (await api.messages(id)).messages[0]!;

      await run.send({ type: "stream", content: "Let me " });
      await run.send({ type: "stream", content: "look it up." });
      const bubble = streamingOf(page, "alice");
      await expect.poll(() => shown(page)).toEqual([`${asked.id} complete: Where is the report?`, "~streaming~alice streaming: Let me look it up."]);
      expect(await bubble.getAttribute("data-status")).toBe("streaming");
      expect(await bubble.getAttribute("aria-label")).toBe("Message from alice");
      expect(await bubble.locator(".cursor").count()).toBe(1); // the streaming cursor
      expect(await bubble.getByRole("button", { name: /Revert/ }).count()).toBe(0); // no message to revert yet
      expect(await page.getByRole("button", { name: "Stop" }).isVisible()).toBe(true);
      // The server holds no message with that text: it is only streamed.
      expect((await api.messages(id)).messages.map((m) => m.content)).toEqual(["Where is the report?"]);
      await screenshot(page, "v1-streaming");
      // A page opened now shows all of it so far: its snapshot carries it.
      const late = await openPage(page.context().browser()!);
      await late.page.goto(`${server.url}/c/${id}`);
      await expect.poll(() => shown(late.page)).toEqual([`${asked.id} complete: Where is the report?`, "~streaming~alice streaming: Let me look it up."]);
      expect(late.errors).toEqual([]);
      await late.close();

      // The result row takes its place.
      await run.send({ type: "result", content: "Let me look it up." });
      const rows = async () => (await api.messages(id)).messages;
      const first = (await rows()).find((m) => m.role === "assistant")!;
      await expect.poll(() => shown(page)).toEqual([`${asked.id} complete: Where is the report?`, `${first.id} streaming: Let me look it up.`]);
      expect(await bubble.count()).toBe(0);

      // A tool row, then more text streamed, then its row, then complete.
      await run.send({ type: "tool", callId: "c1", toolName: "search", status: "running", args: { q: "report" } });
      await run.send({ type: "stream", content: "Found it in /docs." });
      await expect.poll(async () => (await shown(page)).slice(2)).toEqual(["tool-c1 streaming: [search, running]", "~streaming~alice streaming: Found it in /docs."]);
      await run.send({ type: "tool", callId: "c1", toolName: "search", status: "completed", result: "/docs/report.md" });
      await run.send({ type: "result", content: "Found it in /docs." });
      await run.send({ type: "complete" });
      const all = await rows();
      expect(all.map((m) => `${m.role}:${m.status}:${m.content}`)).toEqual([
        "user:complete:Where is the report?",
        "assistant:complete:Let me look it up.",
        "tool:complete:",
        "assistant:complete:Found it in /docs.",
      ]);
      await expect.poll(() => shown(page)).toEqual(all.map((m) => `${m.id} complete: ${m.role === "tool" ? "[search, completed]" : m.content}`));
      expect(await bubble.count()).toBe(0);
      await expect.poll(() => page.getByRole("button", { name: "Stop" }).count()).toBe(0);
      await screenshot(page, "v1-rows");
    } finally {
      run.close();
      await server.stop();
    }
  });
});
