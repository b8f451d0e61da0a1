// Builds the parley binary once and starts one open server that the tests
// share (each test makes conversations of its own); tests that stop or
// restart a server start their own with startServer.

import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";
import { startServer } from "./server.js";

declare module "vitest" {
  export interface ProvidedContext {
    parleyBinary: string;
    serverUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), "parley-client-bin-"));
  const binary = join(dir, "parley");
  const root = resolve(import.meta.dirname, "../../..");
  execFileSync("go", ["build", "-o", binary, "./cmd/parley"], { cwd: root, stdio: "inherit" });
  const server = await startServer(binary);
  project.provide("parleyBinary", binary);
  project.provide("serverUrl", server.url);
  return async () => {
    await server.stop();
    rmSync(dir, { recursive: true, force: true });
  };
}
