// Accessibility, in Chromium against `parley serve`: axe-core checks the
// list of conversations and a conversation's page (messages, a tool card,
// a thread, the flow picture, an approval and a question drawn from a JSON
// Schema, its form's errors, the composer), the revert dialog, the
// dialogs that make, edit, close and delete a conversation, the token
// form and the tokens' page (a new token's secret, the revoke dialog), at
// desktop (1280, light) and phone (390, dark) widths, and finds nothing
// serious or critical. Then the main
// actions by keyboard alone: open a conversation from the list, write and
// send a prompt, approve a tool call and answer a question, jump from the
// flow picture to a message, open and cancel the revert dialog.

import { ParleyClient } from "@parleyhq/client";
import { createRequire } from "node:module";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Runner } from "../../client/test/runner.js";
import { startServer, type Server } from "../../client/test/server.js";
import { browserPerFile } from "./lib/browser.js";

const axePath = createRequire(import.meta.url).resolve("axe-core/axe.min.js");

let server: Server;
const browser = browserPerFile();
let api: ParleyClient;

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"));
  api = new ParleyClient({ baseUrl: server.url });
});

afterAll(async () => {
  await server?.stop();
});

/** A violation as the test reports it: the rule, its impact and where it is. */
interface Finding {
  id: string;
  impact: string;
  help: string;
  targets: string[];
}

/** Runs axe-core on the page as it is (injected once per page load) and returns the serious and critical violations. */
async function audit(page: Page): Promise<Finding[]> {
  if (!(await page.evaluate(() => "axe" in window))) await page.addScriptTag({ path: axePath });
  const found = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run(ctx: Document, opts: object): Promise<{ violations: { id: string; impact?: string | null; help: string; nodes: { target: unknown[] }[] }[] }> } }).axe;
    const r = await axe.run(document, { resultTypes: ["violations"] });
    return r.violations.map((v) => ({ id: v.id, impact: v.impact ?? "", help: v.help, targets: v.nodes.map((n) => n.target.join(" ")) }));
  });
  return found.filter((f) => f.impact === "serious" || f.impact === "critical");
}

/** A conversation with all the page shows: messages, a tool card, a thread, an approval and a question with a form. */
async function scene(title: string): Promise<{ id: string; runner: Runner }> {
  const id = (await api.createConversation({ title, participants: ["ops"], members: ["you"] })).conversation.id;
  const r = await Runner.connect(server.url, id, "ops");
  await r.create("m1");
  await r.text("m1", "Here is the **plan**:\n\n- check the build\n- deploy it\n\n`make deploy` does it.");
  await r.tool("m1", "call_0", "completed", { args: { q: "build status" }, result: { ok: true } });
  await r.finalize("m1");
  await r.create("m2", "m1");
  await r.text("m2", "A reply in the thread of the plan.");
  await r.finalize("m2");
  await r.create("m3");
  await r.text("m3", "Before I deploy, I need a yes.");
  await r.tool("m3", "call_1", "pending", { toolName: "deploy", args: { env: "prod" } });
  await r.send({ type: "message.part.input-request", turnId: "m3", requestId: "appr", kind: "approval", toolCallId: "call_1", toolName: "deploy", args: { env: "prod" }, title: "Deploy to prod?" });
  await r.send({
    type: "message.part.input-request",
    turnId: "m3",
    requestId: "q",
    kind: "question",
    title: "How should it roll out?",
    schema: { type: "object", required: ["region"], properties: { region: { type: "string", enum: ["eu", "us"] }, replicas: { type: "integer", title: "Replicas" }, canary: { type: "boolean", title: "Canary first" } } },
  });
  return { id, runner: r };
}

// Each width in one of the two colour schemes, for the contrast of both.
const sizes = [
  { name: "desktop", viewport: { width: 1280, height: 800 }, colorScheme: "light" },
  { name: "phone", viewport: { width: 390, height: 844 }, colorScheme: "dark" },
] as const;

/** Presses Tab until the focused element satisfies `is` (a function of it run in the page), at most `max` times. */
async function tabTo(page: Page, is: string, max = 120): Promise<void> {
  for (let i = 0; i < max; i++) {
    await page.keyboard.press("Tab");
    if (await page.evaluate(`(${is})(document.activeElement)`)) return;
  }
  throw new Error(`no element as ${is} within ${max} presses of Tab`);
}

describe("accessibility", () => {
  for (const size of sizes) {
    it(`finds nothing serious or critical on the list, a conversation's page and its dialogs (${size.name}, ${size.viewport.width} px)`, async () => {
      const { runner } = await scene(`Audit ${size.name}`);
      // bypassCSP: the server allows only its own scripts, and axe is injected inline.
      const { page } = await browser.open({ viewport: size.viewport, colorScheme: size.colorScheme, bypassCSP: true });
      const found: Record<string, Finding[]> = {};

      await page.goto(`${server.url}/`);
      await page.getByRole("link", { name: new RegExp(`^Audit ${size.name}`) }).waitFor();
      found["list"] = await audit(page);
      // The audit can fail: a button without a name is found.
      await page.evaluate(() => document.querySelector("main")!.append(Object.assign(document.createElement("button"), { id: "unnamed" })));
      expect((await audit(page)).map((f) => f.id)).toContain("button-name");
      await page.evaluate(() => document.getElementById("unnamed")!.remove());
      // Messages found by the list's search.
      const search = page.getByRole("searchbox", { name: "Search messages" });
      await search.fill("plan");
      await page.getByRole("list", { name: "Messages found" }).getByRole("link").first().waitFor();
      found["search"] = await audit(page);
      await search.fill("");
      await expect.poll(() => page.getByRole("list", { name: "Messages found" }).count()).toBe(0);
      // The form that makes a conversation, telling what is wrong with a field.
      await page.getByRole("button", { name: "New conversation" }).click();
      const make = page.getByRole("dialog", { name: "New conversation" });
      await make.getByLabel("Participants").fill("a b/c");
      await make.getByRole("button", { name: "Create" }).click();
      await make.getByRole("alert").waitFor();
      found["new"] = await audit(page);
      await page.keyboard.press("Escape");
      await expect.poll(() => page.getByRole("dialog").count()).toBe(0);

      // The conversation's page, reached from the list (one load per page).
      await page.getByRole("link", { name: new RegExp(`^Audit ${size.name}`) }).click();
      await page.getByRole("status", { name: "Connection: live" }).waitFor();
      await page.locator("[data-request-id='q']").waitFor();
      await page.getByText("A reply in the thread of the plan.").waitFor();
      if (size.name !== "phone") await page.locator("#flow-panel .flow-lanes").first().waitFor();
      // An open tool card, and the question's form telling what is missing.
      await page.getByRole("button", { name: "search, completed" }).click();
      const form = page.locator("[data-request-id='q']");
      await form.getByRole("button", { name: "Send answer" }).click();
      await form.getByRole("alert").waitFor();
      found["conversation"] = await audit(page);
      if (size.name === "phone") {
        // On a phone the flow is a view of its own, in place of the messages.
        await page.getByRole("button", { name: "Show flow" }).click();
        await page.locator("#flow-panel .flow-lanes").first().waitFor();
        found["flow"] = await audit(page);
        await page.getByRole("button", { name: "Hide flow" }).click();
        await page.getByRole("button", { name: "search, completed" }).waitFor();
      }

      // The revert dialog.
      await page.getByRole("button", { name: "Revert from this message of ops" }).first().click();
      await page.getByRole("dialog").waitFor();
      found["dialog"] = await audit(page);
      await page.keyboard.press("Escape");
      await expect.poll(() => page.getByRole("dialog").count()).toBe(0);
      // The dialogs that edit, close and delete the conversation (on a phone, among the head's details).
      if (size.name === "phone") await page.getByRole("button", { name: "Details of the conversation" }).click();
      for (const [button, key] of [["Edit", "edit"], ["Close", "close"], ["Delete", "delete"]] as const) {
        await page.getByRole("button", { name: button, exact: true }).click();
        await page.getByRole("dialog").waitFor();
        found[key] = await audit(page);
        await page.keyboard.press("Escape");
        await expect.poll(() => page.getByRole("dialog").count()).toBe(0);
      }

      if (Object.values(found).some((f) => f.length > 0)) console.log(`axe at ${size.viewport.width} px:\n` + JSON.stringify(found, null, 1));
      expect(found).toEqual({ list: [], search: [], new: [], conversation: [], dialog: [], edit: [], close: [], delete: [], ...(size.name === "phone" ? { flow: [] } : {}) });
      await runner.finalize("m3");
      runner.close();
    });
  }

  it("opens a conversation, answers its requests, jumps from the flow, cancels a revert, sends a prompt, replies in a thread and makes a conversation with the keyboard alone", async () => {
    const { id, runner } = await scene("Keyboard only");
    const { page } = await browser.open();
    await page.goto(`${server.url}/`);
    const link = page.getByRole("link", { name: /^Keyboard only/ });
    await link.waitFor();

    // Open the conversation from the list.
    await tabTo(page, `(e) => e?.tagName === "A" && (e.textContent ?? "").startsWith("Keyboard only")`);
    await page.keyboard.press("Enter");
    await page.getByRole("status", { name: "Connection: live" }).waitFor();
    expect(new URL(page.url()).pathname).toBe(`/c/${id}`);

    // Approve the tool call: its button, reached by Tab, pressed with Enter.
    await page.getByRole("group", { name: "Deploy to prod?" }).waitFor();
    await tabTo(page, `(e) => e?.getAttribute("aria-label") === "Approve: Deploy to prod?"`);
    await page.keyboard.press("Enter");
    await expect.poll(async () => (await api.inputs(id)).map((i) => i.requestId)).toEqual(["q"]);

    // Answer the question's form: choose the region, type the replicas, tick Canary, send.
    await tabTo(page, `(e) => e?.tagName === "SELECT" && e.closest("[data-request-id='q']") !== null`);
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("ArrowDown");
    await page.keyboard.press("Tab");
    await page.keyboard.type("3");
    await page.keyboard.press("Tab");
    await page.keyboard.press("Space");
    await tabTo(page, `(e) => e?.tagName === "BUTTON" && e.textContent === "Send answer"`, 5);
    await page.keyboard.press("Enter");
    await expect.poll(() => api.inputs(id)).toEqual([]);
    await expect.poll(() => runner.pushes.find((p) => p["type"] === "input.answered" && p["requestId"] === "q")?.["answer"]).toEqual({ region: "us", replicas: 3, canary: true });
    expect(runner.pushes.find((p) => p["type"] === "input.answered" && p["requestId"] === "appr")?.["answer"]).toEqual({ approved: true });

    // A turn of the flow picture jumps to its message: Enter on it moves the focus there.
    await tabTo(page, `(e) => e?.getAttribute("role") === "button" && e.closest("#flow-panel") !== null`, 200);
    await page.keyboard.press("Enter");
    await expect.poll(() => page.evaluate(() => document.activeElement?.closest("[data-message-id]")?.getAttribute("data-message-id") ?? null)).not.toBeNull();

    // Revert opens its dialog with the focus on Cancel; Escape closes it, reverting nothing.
    await tabTo(page, `(e) => (e?.getAttribute("aria-label") ?? "").startsWith("Revert from this message")`, 200);
    await page.keyboard.press("Enter");
    await page.getByRole("dialog").waitFor();
    expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Cancel");
    await page.keyboard.press("Escape");
    await expect.poll(() => page.getByRole("dialog").count()).toBe(0);

    // Write a prompt in the composer and send it with Enter.
    await tabTo(page, `(e) => e?.getAttribute("aria-label") === "Prompt"`, 200);
    await page.keyboard.type("ship it by keyboard");
    await page.keyboard.press("Enter");
    await expect.poll(async () => (await api.promptQueue(id)).prompts.map((p) => p.content)).toContain("ship it by keyboard");
    // ops ends its answer (and its turn): the floor is free for a person's message.
    await runner.finalize("m3");
    runner.close();

    // Reply in a message's thread: its Reply button, then the composer, where Enter sends.
    await tabTo(page, `(e) => (e?.getAttribute("aria-label") ?? "").startsWith("Reply to this message of ops")`, 200);
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.getAttribute("aria-label"))).toBe("Message");
    await page.keyboard.type("a reply by keyboard");
    await page.keyboard.press("Enter");
    await expect.poll(async () => (await api.messages(id)).messages.find((m) => m.content === "a reply by keyboard")?.replyTo).toMatch(/^m\d$/);

    // Make a conversation: the button, the form's fields in order, Enter to create.
    await tabTo(page, `(e) => e?.textContent === "New conversation"`, 200);
    await page.keyboard.press("Enter");
    expect(await page.evaluate(() => document.activeElement?.id ?? "")).toMatch(/-t$/); // the title
    await page.keyboard.type("Made by keyboard");
    await page.keyboard.press("Tab");
    await page.keyboard.type("ops, you");
    await page.keyboard.press("Enter");
    await page.waitForURL((u) => u.pathname.startsWith("/c/") && u.pathname !== `/c/${id}`);
    const made = decodeURIComponent(new URL(page.url()).pathname.slice(3));
    expect((await api.conversation(made)).conversation).toMatchObject({ title: "Made by keyboard", participants: ["ops", "you"] });
  });

  // Last: its token ends the server's open mode.
  it("finds nothing serious or critical in the token form, refused and accepted, and the tokens' page and its dialog, at both widths", async () => {
    const token = (await api.createToken({ kind: "admin" })).token!;
    for (const size of sizes) {
      const opened = await browser.open({ viewport: size.viewport, colorScheme: size.colorScheme, bypassCSP: true });
      const page = opened.page;
      await page.goto(`${server.url}/`);
      await page.getByRole("heading", { name: "This server wants a token" }).waitFor();
      const found: Record<string, Finding[]> = { form: await audit(page) };
      await page.getByLabel("Token").fill("pk_not_a_token");
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByText("The server refused the token given").waitFor();
      found["refused"] = await audit(page);
      await page.getByLabel("Token").fill(token);
      await page.getByRole("button", { name: "Sign in" }).click();
      await page.getByRole("button", { name: "Sign out" }).waitFor();
      await page.getByRole("link", { name: /^Audit / }).first().waitFor();
      found["accepted"] = await audit(page);
      // The tokens' page, a new token's secret, and the revoke dialog.
      await page.getByRole("link", { name: "Tokens" }).click();
      await page.getByRole("table").waitFor();
      found["tokens"] = await audit(page);
      await page.getByLabel("Agent id").fill("audit");
      await page.getByRole("button", { name: "Create token" }).click();
      await page.getByRole("textbox", { name: "Secret" }).waitFor();
      found["secret"] = await audit(page);
      await page.getByRole("button", { name: /^Revoke Agent token audit/ }).first().click();
      await page.getByRole("dialog").waitFor();
      found["revoke"] = await audit(page);
      // By keyboard: the dialog opens with the focus on Cancel; Escape closes it.
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Cancel");
      await page.keyboard.press("Escape");
      await expect.poll(() => page.getByRole("dialog").count()).toBe(0);
      if (Object.values(found).some((f) => f.length > 0)) console.log(`axe at ${size.viewport.width} px:\n` + JSON.stringify(found, null, 1));
      expect(found, size.name).toEqual({ form: [], refused: [], accepted: [], tokens: [], secret: [], revoke: [] });
      expect(opened.errors, "uncaught errors in the page").toEqual([]);
      await opened.close();
    }
  });
});
