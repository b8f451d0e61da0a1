// The tokens' page, in Chromium against `parley serve` with tokens: an
// admin lists the tokens (never a secret), makes one and sees its secret
// once (Copy puts it on the clipboard and says so), and revokes one after a
// confirmation, upon which a page signed in with it asks for a token again.
// It fits 1280 and 390 px without scrolling sideways; non-admins get no link.
// On an open server the first admin token made there signs the browser in.

import { ParleyClient } from "@parleyhq/client";
import type { Page } from "playwright-core";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";
import { startServer, type Server } from "../../client/test/server.js";
import { browserPerFile, screenshot } from "./lib/browser.js";

let server: Server;
const browser = browserPerFile();
let admin: ParleyClient;
let adminToken: string;

beforeAll(async () => {
  server = await startServer(inject("parleyBinary"));
  adminToken = (await new ParleyClient({ baseUrl: server.url }).createToken({ kind: "admin", name: "first admin" })).token!;
  admin = new ParleyClient({ baseUrl: server.url, token: adminToken });
});

afterAll(async () => {
  await server?.stop();
});

async function signIn(page: Page, token: string): Promise<void> {
  await page.getByLabel("Token").fill(token);
  await page.getByRole("button", { name: "Sign in" }).click();
}

/** Whether the document scrolls sideways. */
function sideways(page: Page): Promise<boolean> {
  return page.evaluate(() => document.documentElement.scrollWidth > document.documentElement.clientWidth);
}

describe("the tokens' page", () => {
  it("makes a token and shows its secret once, with a Copy button that copies it", async () => {
    const { page } = await browser.open({ permissions: ["clipboard-read", "clipboard-write"] });
    await page.goto(server.url + "/");
    await signIn(page, adminToken);
    await page.getByRole("link", { name: "Tokens" }).click();
    await page.waitForURL("**/tokens");
    await page.getByRole("heading", { name: "Tokens", level: 1 }).waitFor();
    const table = page.getByRole("table");
    await table.getByText("first admin").waitFor();
    expect(await table.textContent()).not.toContain(adminToken);

    await page.getByLabel("Kind").selectOption("agent");
    await page.getByLabel("Agent id").fill("helper");
    await page.getByLabel("Label (optional)").fill("helper on ci");
    await page.getByRole("button", { name: "Create token" }).click();
    const secret = page.getByRole("textbox", { name: "Secret" });
    await secret.waitFor();
    const value = await secret.inputValue();
    expect(value).toMatch(/^pk_/);
    await page.getByText("it will not be shown again").waitFor();
    await page.getByRole("button", { name: "Copy" }).click();
    await page.getByRole("status").filter({ hasText: "Copied" }).waitFor();
    expect(await page.evaluate(() => navigator.clipboard.readText())).toBe(value);
    // The token works, and is listed without its secret.
    const made = new ParleyClient({ baseUrl: server.url, token: value });
    expect(await made.whoami()).toMatchObject({ kind: "agent", agentId: "helper" });
    await table.getByText("helper on ci").waitFor();
    expect(await table.textContent()).not.toContain(value);
    await screenshot(page, "tokens");
    // Done: the secret is gone from the page for good.
    await page.getByRole("button", { name: "Done" }).click();
    await expect.poll(() => page.getByRole("textbox", { name: "Secret" }).count()).toBe(0);
    await page.reload();
    await table.getByText("helper on ci").waitFor();
    expect(await page.content()).not.toContain(value);
  });

  it("revokes a token after a confirmation, and a page signed in with it asks for a token again", async () => {
    const viewer = await admin.createToken({ kind: "viewer", name: "wall screen" });
    const signedIn = await browser.open();
    // Another browser (context), signed in with the viewer token.
    const other = await signedIn.page.context().browser()!.newContext();
    try {
      const wall = await other.newPage();
      await wall.goto(server.url + "/");
      await signIn(wall, viewer.token!);
      await wall.getByText("Viewer token: reads only").waitFor();

      const page = signedIn.page;
      await page.goto(server.url + "/tokens");
      await signIn(page, adminToken);
      await page.getByRole("heading", { name: "Tokens", level: 1 }).waitFor();
      const revoke = page.getByRole("button", { name: /^Revoke Viewer token “wall screen”/ });
      // Cancel first: nothing is revoked, and the focus comes back.
      await revoke.click();
      const dialog = page.getByRole("dialog", { name: "Revoke this token?" });
      await dialog.waitFor();
      expect(await page.evaluate(() => document.activeElement?.textContent)).toBe("Cancel");
      await page.keyboard.press("Escape");
      await expect.poll(() => dialog.count()).toBe(0);
      expect((await admin.tokens()).find((t) => t.id === viewer.id)?.revokedAt).toBeNull();

      await revoke.click();
      await dialog.getByRole("button", { name: "Revoke" }).click();
      await page.getByRole("table").getByText(/^Revoked /).waitFor();
      expect((await admin.tokens()).find((t) => t.id === viewer.id)?.revokedAt).not.toBeNull();

      // The wall's page loses access: reloaded, it asks for a token again.
      await wall.reload();
      await wall.getByText("The server refused the token given").waitFor();
      await wall.getByRole("heading", { name: "This server wants a token" }).waitFor();
    } finally {
      await other.close();
    }
  });

  for (const width of [1280, 390]) {
    it(`fits ${width} px without scrolling sideways`, async () => {
      const { page } = await browser.open({ viewport: { width, height: 800 } });
      await page.goto(server.url + "/tokens");
      await signIn(page, adminToken);
      await page.getByRole("table").waitFor();
      expect(await sideways(page)).toBe(false);
      await page.getByLabel("Kind").selectOption("viewer");
      await page.getByRole("button", { name: "Create token" }).click();
      await page.getByRole("textbox", { name: "Secret" }).waitFor();
      expect(await sideways(page)).toBe(false);
      await page.getByRole("button", { name: /^Revoke / }).first().click();
      await page.getByRole("dialog").waitFor();
      expect(await sideways(page)).toBe(false);
      await screenshot(page, `tokens-${width}`);
    });
  }

  it("is not offered to a viewer, and says so at its address", async () => {
    const viewer = await admin.createToken({ kind: "viewer" });
    const { page } = await browser.open();
    await page.goto(server.url + "/tokens");
    await signIn(page, viewer.token!);
    await page.getByText("Only an admin token may manage tokens.").waitFor();
    expect(await page.getByRole("link", { name: "Tokens" }).count()).toBe(0);
  });

  it("on an open server, makes the first token, which ends open mode, and signs the browser in with it", async () => {
    const open = await startServer(inject("parleyBinary"));
    try {
      const { page } = await browser.open();
      await page.goto(open.url + "/");
      await page.getByText("Open server (no tokens)").waitFor();
      await page.getByRole("link", { name: "Tokens" }).click();
      await page.getByText("Making a token ends that").waitFor();
      await page.getByLabel("Kind").selectOption("admin");
      await page.getByRole("button", { name: "Create token" }).click();
      const secret = await page.getByRole("textbox", { name: "Secret" }).inputValue();
      await page.getByText("Admin token", { exact: true }).waitFor();
      await page.getByRole("button", { name: "Sign out" }).waitFor();
      // Still shown, this once, after the sign-in.
      expect(await page.getByRole("textbox", { name: "Secret" }).inputValue()).toBe(secret);
      expect(await new ParleyClient({ baseUrl: open.url, token: secret }).whoami()).toMatchObject({ kind: "admin", open: false });
      await page.getByRole("table").getByText("Admin").waitFor();
      // The page is signed in by the cookie: a reload stays signed in.
      await page.reload();
      await page.getByRole("button", { name: "Sign out" }).waitFor();
    } finally {
      await open.stop();
    }
  });
});
