// The suite builds the parley binary once and starts one server that the
// tests share (each test has conversations of its own).
import { defineConfig } from "vitest/config";

export default defineConfig({
  test: {
    include: ["test/**/*.test.ts"],
    globalSetup: ["test/global-setup.ts"],
    testTimeout: 30_000,
    hookTimeout: 90_000,
  },
});
