// MCP against Parley: the real @modelcontextprotocol/sdk client over
// Streamable HTTP, with the agent "you"'s token, as Claude Code or the
// OpenAI Agents SDK would connect.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { expect, test } from "vitest";
import { Runner, scriptedAnswer } from "./runner.js";
import { admin, stored, url, you } from "./stored.js";

async function connect(token: string): Promise<Client> {
  const client = new Client({ name: "parley-compat", version: "1.0.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url() + "/v1/mcp"), { requestInit: { headers: { Authorization: "Bearer " + token } } }));
  return client;
}

/** Makes a conversation as the admin; its id. */
async function conversation(body: object): Promise<string> {
  const r = await fetch(url() + "/v1/conversations", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + admin() },
    body: JSON.stringify(body),
  });
  if (r.status !== 201) throw new Error(`conversation: ${r.status} ${await r.text()}`);
  return ((await r.json()) as { conversation: { id: string } }).conversation.id;
}

/** Posts a message as agent (through the admin token). */
async function post(id: string, agentId: string, body: object): Promise<void> {
  const r = await fetch(`${url()}/v1/conversations/${encodeURIComponent(id)}/messages`, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + admin() },
    body: JSON.stringify({ agentId, ...body }),
  });
  if (r.status !== 201) throw new Error(`post: ${r.status} ${await r.text()}`);
}

type Result = { isError?: boolean; structuredContent?: Record<string, unknown>; content: { type: string; text?: string }[] };

async function call(c: Client, name: string, args: Record<string, unknown>): Promise<Result> {
  return (await c.callTool({ name, arguments: args })) as Result;
}

async function ok(c: Client, name: string, args: Record<string, unknown>): Promise<Record<string, unknown>> {
  const r = await call(c, name, args);
  if (r.isError) throw new Error(`${name}: ${r.content.map((x) => x.text).join(" ")}`);
  return r.structuredContent ?? {};
}

test("lists its tools, posts, and waits for its turn while another agent writes", async () => {
  const c = await connect(you());
  const { tools } = await c.listTools();
  expect(tools.map((t) => t.name).sort()).toEqual([
    "answer_input", "ask_agent", "claim_turn", "list_conversations", "post_message", "read_conversation", "search_messages", "wait_for_turn",
  ]);
  for (const t of tools) expect(t.inputSchema.type).toBe("object");

  const id = await conversation({ title: "mcp compat", participants: ["you", "bob"] });
  const posted = await ok(c, "post_message", { conversationId: id, content: "over to you, bob", finality: "turn", next: "bob" });
  const mySeq = (posted["message"] as { seq: number }).seq;

  const waiting = ok(c, "wait_for_turn", { conversationId: id, after: mySeq, timeoutSeconds: 60 });
  await post(id, "bob", { content: "done; back to you", finality: "turn", next: "you" });
  const w = await waiting;
  expect(w["yourTurn"]).toBe(true);
  expect(w["guidance"]).toMatchObject({ nextAgentId: "you" });
  const ms = w["messages"] as { agentId: string; parts: { text: string }[] }[];
  expect(ms.map((m) => [m.agentId, m.parts[0]?.text])).toEqual([["bob", "done; back to you"]]);

  const read = await ok(c, "read_conversation", { conversationId: id, limit: 1 });
  expect((read["messages"] as unknown[]).length).toBe(1);
  expect(read["nextAfter"]).toBe(mySeq);
  await c.close();
});

test("asks another agent and gets its answer", async () => {
  const c = await connect(you());
  const id = await conversation({ participants: ["you"] });
  const asking = ok(c, "ask_agent", { conversationId: id, to: "helper", content: "What is 6 x 7?", timeoutSeconds: 60 });
  const run = await Runner.attach(url(), admin(), id);
  expect((await run.next())["content"]).toBe("What is 6 x 7?");
  for (const f of scriptedAnswer("r1")) await run.send(f);
  const a = await asking;
  expect(a["state"]).toBe("completed");
  const s = await stored(id, "r1");
  expect(a["answer"]).toMatchObject({ id: "r1", agentId: "helper", content: s.content });
  run.close();
  await c.close();
});

test("a refused action is a tool error with the API's code and what to do next", async () => {
  const c = await connect(you());
  const id = await conversation({ participants: ["you", "bob"] });
  await post(id, "bob", { content: "thinking…" }); // bob's turn is open
  const r = await call(c, "post_message", { conversationId: id, content: "me too" });
  expect(r.isError).toBe(true);
  expect(r.content[0]?.text).toMatch(/^turn_conflict: .*wait_for_turn/);
  const f = await call(c, "post_message", { conversationId: id, agentId: "bob", content: "as bob" });
  expect(f.isError).toBe(true);
  expect(f.content[0]?.text).toMatch(/^forbidden: /);
  const outside = await call(c, "read_conversation", { conversationId: await conversation({ participants: ["bob"] }) });
  expect(outside.content[0]?.text).toMatch(/^forbidden: /);
  await c.close();
});

test("no token is refused over HTTP", async () => {
  const r = await fetch(url() + "/v1/mcp", {
    method: "POST",
    headers: { "Content-Type": "application/json", Accept: "application/json, text/event-stream" },
    body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
  });
  expect(r.status).toBe(401);
});
