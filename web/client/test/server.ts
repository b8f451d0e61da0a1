// Runs the real parley binary for the tests: built once (global-setup.ts),
// started on a free loopback port with a SQLite file of its own. The web
// UI's browser tests start it the same way (`parley demo` among others).

import { spawn, type ChildProcess } from "node:child_process";
import { mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";

/** A running `parley serve`. */
export interface Server {
  url: string;
  /** The address it listens on (host:port). */
  addr: string;
  db: string;
  /** What it has logged so far (standard error). */
  output(): string;
  /** Stops it (SIGTERM: it ends its streams with an `unavailable` error frame) and waits for it. */
  stop(): Promise<void>;
  /** Kills it (SIGKILL) and waits for it. */
  kill(): Promise<void>;
}

/**
 * Starts `parley serve` (or the command given, such as `demo`) on db (a new
 * file if not given) at addr (a free port if not given).
 */
export async function startServer(
  binary: string,
  opts: { db?: string; addr?: string; args?: string[]; command?: "serve" | "demo" } = {},
): Promise<Server> {
  const db = opts.db ?? join(mkdtempSync(join(tmpdir(), "parley-client-")), "parley.db");
  const child = spawn(binary, [opts.command ?? "serve", "-db", db, "-addr", opts.addr ?? "127.0.0.1:0", ...(opts.args ?? [])], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const exited = new Promise<void>((resolve) => child.once("exit", () => resolve()));
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
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`parley exited with ${code}:\n${log}`));
    });
  });
  const end = (signal: NodeJS.Signals) => async () => {
    if (child.exitCode === null && child.signalCode === null) child.kill(signal);
    await exited;
  };
  return { url: "http://" + addr, addr, db, output: () => log, stop: end("SIGTERM"), kill: end("SIGKILL") };
}

export type { ChildProcess };
