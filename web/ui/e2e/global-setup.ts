// Builds the UI from its sources into internal/webui/dist (./scripts/test checks
// first that the committed build is fresh, so there this changes nothing),
// then the parley binary that embeds it, once for every browser test.

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    parleyBinary: string;
  }
}

export default function setup(project: TestProject): () => void {
  const dir = mkdtempSync(join(tmpdir(), "parley-e2e-bin-"));
  const binary = join(dir, "parley");
  // NODE_ENV: Vitest sets it to "test", with which Vite would build React's development form.
  const env = { ...process.env, NODE_ENV: "production" };
  execFileSync("npx", ["vite", "build", "--logLevel", "warn"], { cwd: resolve(import.meta.dirname, ".."), stdio: "inherit", env });
  execFileSync("go", ["build", "-o", binary, "./cmd/parley"], { cwd: resolve(import.meta.dirname, "../../.."), stdio: "inherit" });
  project.provide("parleyBinary", binary);
  return () => rmSync(dir, { recursive: true, force: true });
}
