// An agent waits on a person, in Chromium against `parley serve`: a runner
// (raw runner frames) asks for approval of a tool call and asks a
// question; the list of conversations says the conversation waits, its
// page lists both in the head, jumps to each, and a person
// approves (or denies, with a reason) and answers (choosing an option, or
// filling a form drawn from a JSON Schema) with the page's controls. The
// runner gets the answers, and the page shows who answered. At desktop
// (1280) and phone (390×844) widths.

import { ParleyClient } from "@parleyhq/client";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { Runner } from "../../client/test/runner.js";
import { startServer, type Server } from "../../client/test/server.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

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

/** Waits until the runner was told that request `id` ended, and returns what it was told. */
async function outcome(r: Runner, id: string): Promise<Record<string, unknown>> {
  await expect.poll(() => r.pushes.some((p) => p["type"] === "input.answered" && p["requestId"] === id), { timeout: 15_000 }).toBe(true);
  return r.pushes.find((p) => p["type"] === "input.answered" && p["requestId"] === id)!;
}

/** The pending requests the head lists, as their buttons read. */
function headList(page: Page): Promise<string[]> {
  return page.evaluate(() => [...document.querySelectorAll('[aria-label="Requests waiting for an answer"] li button')].map((b) => (b.textContent ?? "").trim()));
}

/** Which request card has the keyboard's focus, if one has. */
function focusedRequest(page: Page): Promise<string | null> {
  return page.evaluate(() => (document.activeElement as HTMLElement | null)?.dataset["requestId"] ?? null);
}

const sizes = [
  { name: "desktop", viewport: { width: 1280, height: 800 }, approve: true, form: false },
  { name: "phone", viewport: { width: 390, height: 844 }, approve: false, form: true },
] as const;

describe("a person answers what an agent asks", () => {
  for (const size of sizes) {
    it(`approves or denies a tool call and answers a question in the page (${size.name}, ${size.viewport.width} px)`, async () => {
      const id = (await api.createConversation({ title: `Inputs ${size.name}`, participants: ["ops"], members: ["you"] })).conversation.id;
      const r = await Runner.connect(server.url, id, "ops");
      const msg = `answer-${size.name}`;
      await r.create(msg);
      await r.text(msg, "Before I deploy, I need a yes. ");
      await r.tool(msg, "call_1", "pending", { toolName: "deploy", args: { env: "prod", version: "1.4.2" } });
      const appr = `appr-${size.name}`;
      const q = `q-${size.name}`;
      await r.send({ type: "message.part.input-request", turnId: msg, requestId: appr, kind: "approval", toolCallId: "call_1", toolName: "deploy", args: { env: "prod", version: "1.4.2" }, title: "Deploy 1.4.2 to prod?" });
      const question = size.form
        ? { title: "How should it roll out?", schema: { type: "object", required: ["region", "replicas"], properties: { region: { type: "string", enum: ["eu", "us"] }, replicas: { type: "integer", title: "Replicas" }, canary: { type: "boolean", title: "Canary first" } } } }
        : { title: "Which region first?", options: [{ label: "eu", description: "Frankfurt" }, { label: "us", description: "Virginia" }] };
      await r.send({ type: "message.part.input-request", turnId: msg, requestId: q, kind: "question", ...question });

      const { page } = await browser.open({ viewport: size.viewport });
      // The list of conversations says that this one waits on a person.
      await page.goto(`${server.url}/`);
      await page.getByRole("link", { name: new RegExp(`^Inputs ${size.name}.*2 requests wait for an answer`) }).waitFor();
      await page.goto(`${server.url}/c/${id}`);
      await page.getByRole("status", { name: "Connection: live" }).waitFor();

      // The head says that the agent waits, on what, and jumps to each.
      await expect.poll(() => headList(page)).toEqual([`Approval from ops: Deploy 1.4.2 to prod?`, `Question from ops: ${question.title}`]);
      expect(await page.getByText("2 requests wait for an answer").count()).toBe(1);
      await page.getByRole("button", { name: `Question from ops: ${question.title}` }).click();
      await expect.poll(() => focusedRequest(page)).toBe(q);
      await page.getByRole("button", { name: "Approval from ops: Deploy 1.4.2 to prod?" }).click();
      await expect.poll(() => focusedRequest(page)).toBe(appr);
      await screenshot(page, `inputs-pending-${size.name}`);

      // The approval card shows the tool and its arguments.
      const card = page.getByRole("group", { name: "Deploy 1.4.2 to prod?" });
      expect(await card.locator("code").first().textContent()).toBe("deploy");
      expect(JSON.parse((await card.locator("pre").textContent()) ?? "")).toEqual({ env: "prod", version: "1.4.2" });
      if (size.approve) {
        await card.getByRole("button", { name: "Approve: Deploy 1.4.2 to prod?" }).click();
      } else {
        // With the keyboard: the reason, then Tab to Approve, Tab to Deny, Enter.
        await card.getByRole("textbox", { name: "Reason (optional)" }).fill("not before the freeze ends");
        await page.keyboard.press("Tab");
        await page.keyboard.press("Tab");
        await page.keyboard.press("Enter");
      }
      const approval = await outcome(r, appr);
      expect(approval).toMatchObject({ status: "answered", answer: size.approve ? { approved: true } : { approved: false, reason: "not before the freeze ends" } });
      await r.send({ type: "input.ack", requestId: appr });
      await card.getByText(size.approve ? /^Approved by .+ at / : /^Denied by .+ at /).waitFor();

      const qcard = page.getByRole("group", { name: question.title });
      if (size.form) {
        await qcard.getByRole("button", { name: "Send answer" }).click();
        await qcard.getByRole("alert").getByText("region is required.").waitFor(); // nothing sent
        await qcard.getByRole("combobox", { name: /region/ }).selectOption({ label: "us" });
        await qcard.getByRole("spinbutton", { name: /Replicas/ }).fill("3");
        await qcard.getByRole("checkbox", { name: /Canary first/ }).check();
      } else {
        await qcard.getByRole("radio", { name: /us/ }).check();
      }
      await qcard.getByRole("button", { name: "Send answer" }).click();
      const answered = await outcome(r, q);
      expect(answered).toMatchObject({ status: "answered", answer: size.form ? { region: "us", replicas: 3, canary: true } : { choices: ["us"] } });
      await r.send({ type: "input.ack", requestId: q });
      await qcard.getByText(/^Answered by .+ at /).waitFor();

      // Nothing waits any more: the head's list is gone, and so is the message's mark.
      await expect.poll(() => headList(page)).toEqual([]);
      await expect.poll(() => page.locator(".mark-awaiting").count()).toBe(0);
      expect(await api.inputs(id)).toEqual([]);
      // Nothing on the page is wider than the screen.
      expect(await page.evaluate(() => document.documentElement.scrollWidth <= window.innerWidth)).toBe(true);
      await screenshot(page, `inputs-answered-${size.name}`);
      await r.finalize(msg);
      r.close();
    });
  }

  it("shows a request that expired as such, with nothing to answer", async () => {
    const id = (await api.createConversation({ title: "Inputs ended", participants: ["ops"], members: ["you"] })).conversation.id;
    const r = await Runner.connect(server.url, id, "ops");
    await r.create("m1");
    await r.send({ type: "message.part.input-request", turnId: "m1", requestId: "late", kind: "approval", title: "Deploy it?", toolName: "deploy", expiresAt: new Date(Date.now() + 1500).toISOString() });
    const { page } = await browser.open();
    await page.goto(`${server.url}/c/${id}`);
    await page.getByRole("status", { name: "Connection: live" }).waitFor();
    const card = page.getByRole("group", { name: "Deploy it?" });
    await card.getByText("Expired unanswered").waitFor({ timeout: 20_000 });
    expect(await page.locator('[aria-label="Requests waiting for an answer"]').count()).toBe(0);
    expect(await card.getByRole("button").count()).toBe(0);
    await r.finalize("m1");
    r.close();
  });
});
