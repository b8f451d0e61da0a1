// The UI on a server that requires tokens, in Chromium: it asks for one,
// signs the browser in with it (an HttpOnly cookie: every tab is signed in,
// no script reads the token), says what it may do, acts as the token's
// agent, and asks again when the token is revoked.

import { ParleyClient, conversationRunner } from "@parleyhq/client";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { NodeWebSocket } from "../../client/test/ws.js";
import { startServer, type Server } from "../../client/test/server.js";
import { screenshot, browserPerFile } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let admin: ParleyClient;
let adminToken: string;
let tokens: { alice: string; viewer: string; aliceId: string };
let ours: string; // alice's and bob's conversation
let theirs: string; // carol's and dave's

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"));
  // The first token ends open mode; the admin token makes the others.
  adminToken = (await new ParleyClient({ baseUrl: server.url }).createToken({ kind: "admin" })).token!;
  admin = new ParleyClient({ baseUrl: server.url, token: adminToken });
  const alice = await admin.createToken({ kind: "agent", agentId: "alice" });
  const viewer = await admin.createToken({ kind: "viewer" });
  tokens = { alice: alice.token!, viewer: viewer.token!, aliceId: alice.id };
  ours = (await admin.createConversation({ title: "alice and bob", participants: ["alice", "bob"] })).conversation.id;
  theirs = (await admin.createConversation({ title: "carol and dave", participants: ["carol", "dave"] })).conversation.id;
});

afterAll(async () => {
  await server?.stop();
});


async function useToken(page: Page, token: string): Promise<void> {
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

describe("a server that requires tokens", () => {
  it("asks for a token, and says when it refused one", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    await page.getByRole("heading", { name: "This server wants a token" }).waitFor();
    await screenshot(page, "token-form");
    await useToken(page, "pk_not_a_token");
    await page.getByText("The server refused the token given").waitFor();
  });

  it("shows what a viewer token may do: read, not write", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/c/" + ours);
    await useToken(page, tokens.viewer);
    await page.getByText("Viewer token: reads only").waitFor();
    await page.getByRole("heading", { name: "alice and bob" }).waitFor();
    expect(await page.getByRole("textbox", { name: "Prompt" }).isDisabled()).toBe(true);
    expect(await page.getByRole("textbox", { name: "Prompt" }).getAttribute("placeholder")).toBe("A viewer token reads only.");
    // Kept in an HttpOnly cookie: no script reads it, no storage holds it, never in the address.
    const stored = await page.evaluate(() => ({ cookie: document.cookie, session: JSON.stringify({ ...sessionStorage }), local: JSON.stringify({ ...localStorage }) }));
    expect(stored.cookie).toContain("parley_csrf=");
    expect(stored.cookie).not.toContain(tokens.viewer);
    expect(stored.session).not.toContain(tokens.viewer);
    expect(stored.local).not.toContain(tokens.viewer);
    expect(page.url()).not.toContain(tokens.viewer);
    const cookies = await page.context().cookies();
    expect(cookies.find((c) => c.name === "parley_session")).toMatchObject({ value: tokens.viewer, httpOnly: true, sameSite: "Strict", path: "/" });
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("heading", { name: "This server wants a token" }).waitFor();
    expect((await page.context().cookies()).map((c) => c.name)).toEqual([]);
  });

  it("signs in once per browser: a second page of the same browser is signed in, and signing out ends both", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    await useToken(page, tokens.alice);
    await page.getByText("Agent token: alice").waitFor();
    const second = await page.context().newPage();
    await second.goto(server.url + "/c/" + ours);
    await second.getByText("Agent token: alice").waitFor();
    await second.getByRole("heading", { name: "alice and bob" }).waitFor();
    // A write from the second page carries the CSRF proof the cookie holds.
    const box = second.getByRole("textbox", { name: "Prompt" });
    await box.fill("From the second tab");
    await box.press("Enter");
    await expect.poll(async () => (await admin.promptQueue(ours, { texts: true })).prompts.map((p) => p.content)).toContain("From the second tab");
    for (const p of (await admin.promptQueue(ours)).prompts) await admin.withdrawPrompt(ours, p.id, { agentId: "alice" });
    await second.getByRole("button", { name: "Sign out" }).click();
    await second.getByRole("heading", { name: "This server wants a token" }).waitFor();
    await page.getByRole("heading", { name: "This server wants a token" }).waitFor();
  });

  it("moves a token an older page kept in sessionStorage to the cookie once, and deletes it", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/healthz");
    await page.evaluate((t) => sessionStorage.setItem("parley.token", t), tokens.viewer);
    await page.goto(server.url + "/");
    await page.getByText("Viewer token: reads only").waitFor();
    expect(await page.evaluate(() => sessionStorage.getItem("parley.token"))).toBeNull();
    expect(await page.evaluate(() => document.cookie)).not.toContain(tokens.viewer);
  });

  it("shows a viewer an agent's request for approval, with nothing to answer it with", async () => {
    const asks = (await admin.createConversation({ title: "bob asks", participants: ["bob"], members: ["alice"] })).conversation.id;
    const bob = new ParleyClient({ baseUrl: server.url, token: adminToken, WebSocket: NodeWebSocket });
    const ctl = new AbortController();
    const serving = conversationRunner(bob, asks, { agentId: "bob" }).serve(
      async (reply, signal) => {
        await reply.askApproval({ title: "Delete the branch?", toolName: "git", args: { branch: "old" } }, { signal }).catch(() => undefined);
      },
      { signal: ctl.signal },
    );
    await admin.prompt(asks, { agentId: "alice", content: "Clean up, please." });
    const { page } = await browser.open();
    await page.goto(server.url + "/c/" + asks);
    await useToken(page, tokens.viewer);
    const card = page.getByRole("group", { name: "Delete the branch?" });
    await card.getByText("You cannot answer it with this identity.").waitFor();
    expect(await card.getByRole("button").count()).toBe(0);
    await page.getByRole("button", { name: "Approval from bob: Delete the branch?" }).waitFor();
    ctl.abort();
    await serving;
  });

  it("acts as an agent token's agent, lists only its conversations, and asks again once it is revoked", async () => {
    const { page } = await browser.open();
    await page.goto(server.url + "/");
    await useToken(page, tokens.alice);
    await page.getByText("Agent token: alice").waitFor();
    await page.getByRole("link", { name: /alice and bob/ }).waitFor();
    expect(await page.getByRole("link", { name: /carol and dave/ }).count()).toBe(0);
    await page.getByRole("link", { name: /alice and bob/ }).click();
    await page.waitForURL(`**/c/${ours}`);

    // A prompt queued as alice (no runner answers it here), then withdrawn.
    const box = page.getByRole("textbox", { name: "Prompt" });
    await box.fill("Could someone summarize the thread?");
    await box.press("Enter");
    const queue = page.getByRole("region", { name: "Prompt queue" });
    await queue.getByText("Could someone summarize the thread?").waitFor();
    const queued = (await admin.promptQueue(ours, { texts: true })).prompts;
    expect(queued).toHaveLength(1);
    expect(queued[0]).toMatchObject({ agentId: "alice", content: "Could someone summarize the thread?" });
    await queue.getByRole("button", { name: "Withdraw: Could someone summarize the thread?" }).click();
    await expect.poll(async () => (await admin.prompts(ours)).length).toBe(0);
    await expect.poll(() => queue.count()).toBe(0);

    // Another's conversation is refused, and says so.
    await page.goto(server.url + "/c/" + theirs);
    await page.getByRole("heading", { name: "This conversation is not open to you" }).waitFor();
    expect(await page.getByRole("alert").textContent()).toContain("agent alice does not take part");
    expect(await page.getByRole("button", { name: "Export JSON" }).count()).toBe(0);

    // Revoked: the page asks for a token again, saying the old one was refused.
    await page.goto(server.url + "/c/" + ours);
    await page.getByRole("heading", { name: "alice and bob" }).waitFor();
    await admin.revokeToken(tokens.aliceId);
    await page.getByText("The server refused the token given").waitFor({ timeout: 15_000 });
  });
});
