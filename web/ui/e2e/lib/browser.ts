// Debian's Chromium, driven by playwright-core (which cannot download its
// own browsers here): one browser per test file, pages that fail the test
// on an uncaught error, and screenshots kept in e2e/screenshots.

import { existsSync, mkdirSync } from "node:fs";
import { join, resolve } from "node:path";
import { chromium, type Browser, type BrowserContextOptions, type Page } from "playwright-core";
import { afterAll, afterEach, beforeAll, expect } from "vitest";

/** Where the browser is: PARLEY_CHROMIUM, or Debian's package. */
export const chromiumPath = process.env["PARLEY_CHROMIUM"] ?? "/usr/bin/chromium";

/** Where screenshots go: PARLEY_SCREENSHOTS, or web/ui/e2e/screenshots. */
export const screenshotDir = process.env["PARLEY_SCREENSHOTS"] ?? resolve(import.meta.dirname, "../screenshots");

/** Starts a headless Chromium. */
export async function launch(): Promise<Browser> {
  if (!existsSync(chromiumPath)) {
    throw new Error(`no Chromium at ${chromiumPath}: install Debian's chromium package (./.ci/run does), or set PARLEY_CHROMIUM`);
  }
  // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
  return chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
}

/** A page in a context of its own (storage apart), with the errors it threw. */
export interface TestPage {
  page: Page;
  /** Uncaught errors of the page's scripts, which a test expects to be none. */
  errors: string[];
  close(): Promise<void>;
}

/** Opens a page; `desktop` is 1280×800 unless options say otherwise. */
export async function openPage(browser: Browser, opts: BrowserContextOptions = {}): Promise<TestPage> {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 }, ...opts });
  const page = await context.newPage();
  const errors: string[] = [];
  page.on("pageerror", (e) => errors.push(e.message));
  return { page, errors, close: () => context.close() };
}

/** Saves a screenshot of the page as NAME.png in the screenshot directory and returns its path. */
export async function screenshot(page: Page, name: string): Promise<string> {
  mkdirSync(screenshotDir, { recursive: true });
  const path = join(screenshotDir, name + ".png");
  await page.screenshot({ path });
  return path;
}

/**
 * The hooks a browser test file shares: a browser for the file, and a page
 * per test (open), closed after the test, which fails if the page threw.
 */
export function browserPerFile(): { open(opts?: BrowserContextOptions): Promise<TestPage> } {
  let browser: Browser | undefined;
  let current: TestPage | undefined;
  beforeAll(async () => {
    browser = await launch();
  });
  afterAll(async () => {
    await browser?.close();
  });
  afterEach(async () => {
    const errors = current?.errors ?? [];
    await current?.close();
    current = undefined;
    expect(errors, "uncaught errors in the page").toEqual([]);
  });
  return {
    async open(opts = {}) {
      current = await openPage(browser!, opts);
      return current;
    },
  };
}
