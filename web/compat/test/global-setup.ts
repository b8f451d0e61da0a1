// Builds the parley binary once and starts one server that the tests
// share, with tokens: an admin (for the tests' runner, which answers as the
// agent "helper") and the agent "you", who asks. Each test has
// conversations of its own.

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { TestProject } from "vitest/node";

declare module "vitest" {
  export interface ProvidedContext {
    serverUrl: string;
    adminToken: string;
    youToken: string;
    parleyBinary: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = mkdtempSync(join(tmpdir(), "parley-compat-"));
  const binary = join(dir, "parley");
  execFileSync("go", ["build", "-o", binary, "./cmd/parley"], { cwd: resolve(import.meta.dirname, "../../.."), stdio: "inherit" });
  const child = spawn(binary, ["serve", "-db", join(dir, "parley.db"), "-addr", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  let log = "";
  const addr = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("parley did not start within 20 s:\n" + log)), 20_000);
    child.stderr.on("data", (b: Buffer) => {
      log += b.toString();
      const m = /msg="parley serving" addr=(\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]!);
      }
    });
    child.once("exit", (code) => reject(new Error(`parley exited with ${code}:\n${log}`)));
  });
  const url = "http://" + addr;
  // The server starts open; the first token created ends that.
  const token = async (body: object, auth?: string): Promise<string> => {
    const r = await fetch(url + "/v1/tokens", {
      method: "POST",
      headers: { "Content-Type": "application/json", ...(auth ? { Authorization: "Bearer " + auth } : {}) },
      body: JSON.stringify(body),
    });
    if (r.status !== 201) throw new Error(`token: ${r.status} ${await r.text()}`);
    return ((await r.json()) as { token: string }).token;
  };
  const admin = await token({ kind: "admin" });
  project.provide("serverUrl", url);
  project.provide("adminToken", admin);
  project.provide("parleyBinary", binary);
  project.provide("youToken", await token({ kind: "agent", agentId: "you" }, admin));
  return async () => {
    child.kill("SIGTERM");
    await exited;
    rmSync(dir, { recursive: true, force: true });
  };
}
