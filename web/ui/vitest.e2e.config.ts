// The browser suite (npm run e2e): the built UI as the parley binary serves
// it, in Debian's Chromium driven by playwright-core, against real servers
// (`parley demo`, and `parley serve` with tokens). One file at a time: each
// starts its own server and browser, and the machine has two cores.
// PARLEY_BROWSER_BENCH=1 runs the browser benchmarks (e2e/bench) instead.
import { fileURLToPath } from "node:url";
import { defineConfig } from "vitest/config";

export default defineConfig({
  resolve: {
    alias: { "@parleyhq/client": fileURLToPath(new URL("../client/src/index.ts", import.meta.url)) },
  },
  test: {
    include: process.env["PARLEY_BROWSER_BENCH"] ? ["e2e/bench/*.bench.ts"] : ["e2e/**/*.test.ts"],
    globalSetup: ["e2e/global-setup.ts"],
    fileParallelism: false,
    testTimeout: 300_000,
    hookTimeout: 90_000,
  },
});
