// A prompt's status and ask-and-wait, against the real server.

import { describe, expect, inject, it } from "vitest";
import { ParleyClient, ParleyError, conversationRunner } from "../src/index.js";
import { NodeWebSocket } from "./helpers.js";

function client(): ParleyClient {
  return new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
}

describe("a prompt's status", () => {
  it("says it waits for a runner, and askAndWait returns the answer once one answers", async () => {
    const c = client();
    const id = (await c.createConversation({ participants: ["bot"], members: ["human"] })).conversation.id;
    expect((await c.conversation(id)).guidance?.runners).toBeUndefined();
    await c.prompt(id, { id: "p0", agentId: "human", content: "anyone?" });
    const st = await c.getPrompt(id, "p0");
    expect(st).toMatchObject({ id: "p0", state: "queued", position: 0, waitingOn: { reason: "runner" } });
    // A wait that passes answers with the status as it is.
    expect((await c.getPrompt(id, "p0", { wait: 10 })).state).toBe("queued");
    await expect(c.getPrompt(id, "nope")).rejects.toSatisfy((e) => e instanceof ParleyError && e.code === "not_found");

    const ctl = new AbortController();
    const serving = conversationRunner(c, id, { agentId: "bot" }).serve(
      async (reply) => {
        await reply.text("echo: " + reply.prompt.content);
      },
      { signal: ctl.signal },
    );
    const first = await c.waitPrompt(id, "p0");
    expect(first).toMatchObject({ state: "completed", runner: "bot" });
    expect((await c.conversation(id)).guidance?.runners).toEqual(["bot"]);
    const { status, message } = await c.askAndWait(id, { id: "p1", agentId: "human", content: "hello" });
    expect(status).toMatchObject({ id: "p1", state: "completed", runner: "bot" });
    expect(message).toMatchObject({ content: "echo: hello", status: "complete", replyTo: "p1" });
    ctl.abort();
    await serving;
  });
});
