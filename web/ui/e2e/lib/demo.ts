// `parley demo` for the browser suite: started as every test server is,
// then waited for until its scene is set. The demo makes its conversation
// only once the server listens, so a test that lists conversations as soon
// as the server answers may find none yet.

import { startServer, type Server } from "../../../client/test/server.js";

/** A running `parley demo` and the id of its conversation. */
export interface Demo {
  server: Server;
  conversationId: string;
}

/**
 * Starts `parley demo` with the scripted person asking once at the start
 * and the scheduled task not firing within a test run (both every hour),
 * so that the questions are the tests', and returns once the demo has
 * logged that it runs, with its conversation's id.
 */
export async function startDemo(binary: string, ms = 30_000): Promise<Demo> {
  const server = await startServer(binary, { command: "demo", args: ["-every", "1h", "-task-every", "1h"] });
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
