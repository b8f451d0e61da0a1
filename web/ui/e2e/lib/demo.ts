// `parley demo` for the browser suite: started as every test server is,
// then waited for until its scene is set. The demo makes its conversation
// only once the server listens, so a test that lists conversations as soon
// as the server answers may find none yet.

import { ParleyClient } from "@parleyhq/client";
import { afterAll, beforeAll, inject } from "vitest";
import { startServer, type Server } from "../../../client/test/server.js";

/** A running `parley demo` and the id of its conversation. */
export interface Demo {
  server: Server;
  conversationId: string;
}

/**
 * Starts `parley demo` with the scripted person asking once at the start
 * and the scheduled task not firing within a test run (both every hour),
 * and no answer waiting for an approval, so that the questions are the
 * tests' and answered at once, and returns once the demo has
 * logged that it runs, with its conversation's id.
 */
export async function startDemo(binary: string, ms = 30_000): Promise<Demo> {
  const server = await startServer(binary, { command: "demo", args: ["-every", "1h", "-task-every", "1h", "-approve-every", "0"] });
  const end = Date.now() + ms;
  for (;;) {
    const m = /msg="demo running[^"]*" conversation=(\S+)/.exec(server.output());
    if (m) return { server, conversationId: m[1]! };
    if (Date.now() > end) {
      await server.stop();
      throw new Error(`the demo did not set its scene within ${ms} ms:\n${server.output()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Waits until ok holds, checking every 50 ms, for at most ms. */
export async function until(ok: () => Promise<boolean> | boolean, ms = 15_000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await ok())) {
    if (Date.now() > end) throw new Error(`not so within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/**
 * Whether the demo answers nothing: no prompt queued, no turn open, no claim
 * held, and the turn not the scribe's (which takes it, through MCP, once a
 * review ends: its minutes are part of the answer's exchange).
 */
export async function isIdle(api: ParleyClient, conversationId: string): Promise<boolean> {
  const [q, v] = await Promise.all([api.prompts(conversationId), api.conversation(conversationId)]);
  return q.length === 0 && !v.head.openTurn && !v.head.claim && v.guidance?.nextAgentId !== "scribe";
}

/** The demo a browser test file shares, started before its tests and stopped after them. */
export interface DemoFile {
  readonly server: Server;
  /** A client of the demo's server. */
  readonly api: ParleyClient;
  readonly conversationId: string;
  /** Waits until the demo answers nothing (at most 30 s). */
  idle(): Promise<void>;
}

/** Starts `parley demo` for the file's tests (see {@link startDemo}) and stops it after them. */
export function demoPerFile(): DemoFile {
  let demo: Demo | undefined;
  let api: ParleyClient | undefined;
  beforeAll(async () => {
    demo = await startDemo(inject("parleyBinary"));
    api = new ParleyClient({ baseUrl: demo.server.url });
  });
  afterAll(async () => {
    await demo?.server.stop();
  });
  const file: DemoFile = {
    get server() {
      return demo!.server;
    },
    get api() {
      return api!;
    },
    get conversationId() {
      return demo!.conversationId;
    },
    idle: () => until(() => isIdle(file.api, file.conversationId), 30_000),
  };
  return file;
}
