// @ts-check
// An agent that takes part in a Parley conversation through MCP only: no
// runner, no other request. It connects to Parley's MCP server (POST
// /v1/mcp) with MCP's official TypeScript SDK, as Claude Code or Cursor
// would, then, until the conversation closes: waits for its turn
// (wait_for_turn), claims it (claim_turn), and answers the last message
// (post_message, ending its turn). A model would write the answer; this
// one is scripted: a reviewer's short note on what it read.
//
//   PARLEY_URL=http://127.0.0.1:7700 PARLEY_TOKEN=pk_… node agent.js CONVERSATION_ID [--turns N]
//
// PARLEY_TOKEN is the agent's token (parley token create -kind agent -agent
// NAME). On a server running open (no tokens) give PARLEY_AGENT=NAME
// instead: the agent it acts as. --turns N stops it after N answers.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { pathToFileURL } from "node:url";
import { parseArgs } from "node:util";

/**
 * A message, as far as the agent reads it.
 * @typedef {{ seq: number, agentId: string, content?: string }} Message
 */

/**
 * What wait_for_turn and read_conversation answer, as far as the agent reads it.
 * @typedef {{
 *   yourTurn?: boolean,
 *   head: { closed?: boolean },
 *   guidance: { nextAgentId: string, kind: "start_turn" | "continue_turn", turn: number } | null,
 *   messages: Message[],
 *   nextAfter?: number,
 * }} ConversationPage
 */

/** A tool's error: its text starts with Parley's error code. */
export class ToolError extends Error {
  /** @param {string} text */
  constructor(text) {
    super(text);
    /** The error's code, such as "turn_conflict". */
    this.code = text.split(":", 1)[0] ?? "";
  }
}

/**
 * Calls a tool; its structured answer, or a ToolError.
 * @param {Client} client
 * @param {string} name
 * @param {Record<string, unknown>} args
 * @returns {Promise<any>}
 */
async function call(client, name, args) {
  const r = await client.callTool({ name, arguments: args });
  if (r.isError) {
    const content = /** @type {{ type: string, text?: string }[]} */ (r.content);
    throw new ToolError(content.map((c) => c.text ?? "").join(" "));
  }
  return r.structuredContent;
}

/**
 * The answer to what was read: a reviewer's note on the last message
 * another agent wrote.
 * @param {Message[]} messages
 * @param {string} me this agent
 */
export function answer(messages, me) {
  const last = messages.filter((m) => m.agentId !== me && m.content).at(-1);
  if (!last) return "Nothing new to review since my last turn.";
  const text = (last.content ?? "").replace(/\s+/g, " ").trim();
  const gist = text.length > 80 ? text.slice(0, 79) + "…" : text;
  return `Reviewed ${last.agentId}'s “${gist}”: looks good to me.`;
}

/**
 * Takes part in conversation id until it closes (or after turns answers).
 * @param {{ url: string, token?: string, agent?: string, conversation: string, turns?: number, log?: (line: string) => void }} o
 */
export async function run(o) {
  const log = o.log ?? (() => {});
  const headers = o.token ? { Authorization: "Bearer " + o.token } : undefined;
  const client = new Client({ name: "parley-example-mcp-agent", version: "0.1.0" });
  await client.connect(new StreamableHTTPClientTransport(new URL("/v1/mcp", o.url), { requestInit: { headers } }));
  // An agent token acts as its agent; an admin token, or an open server,
  // names the agent in each call.
  const as = o.agent ? { agentId: o.agent } : {};
  const conversationId = o.conversation;
  try {
    let after = 0; // what the agent has read: the messages up to this seq
    for (let answered = 0; o.turns === undefined || answered < o.turns; ) {
      /** @type {ConversationPage} */
      const w = await call(client, "wait_for_turn", { conversationId, ...as, after, timeoutSeconds: 30 });
      if (w.head.closed) return log("the conversation is closed");
      if (!w.yourTurn || !w.guidance) continue; // the wait passed: wait again
      try {
        // A new turn: claim it, so that nobody opens it meanwhile; it
        // fails if the conversation moved on since the guidance.
        if (w.guidance.kind === "start_turn") await call(client, "claim_turn", { conversationId, ...as, expectTurn: w.guidance.turn });
        const messages = [...w.messages];
        for (let next = w.nextAfter; next; ) {
          /** @type {ConversationPage} */
          const page = await call(client, "read_conversation", { conversationId, after: next });
          messages.push(...page.messages);
          next = page.nextAfter;
        }
        after = messages.at(-1)?.seq ?? after;
        const text = answer(messages, w.guidance.nextAgentId); // it names this agent
        await call(client, "post_message", { conversationId, ...as, content: text, finality: "turn" });
        answered++;
        log(`turn ${w.guidance.turn}: ${text}`);
      } catch (e) {
        // Another agent took the turn first: wait for the next one.
        if (!(e instanceof ToolError) || !["turn_conflict", "claim_conflict", "precondition_failed"].includes(e.code)) throw e;
        log(`turn ${w.guidance.turn} was taken first (${e.code}); waiting again`);
      }
    }
  } finally {
    await client.close();
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values, positionals } = parseArgs({ allowPositionals: true, options: { turns: { type: "string" } } });
  const conversation = positionals[0];
  const token = process.env["PARLEY_TOKEN"] || undefined;
  const agent = process.env["PARLEY_AGENT"] || undefined;
  if (!conversation || (!token && !agent)) {
    console.error("usage: PARLEY_TOKEN=pk_… node agent.js CONVERSATION_ID [--turns N]\n   (on a server running open: PARLEY_AGENT=NAME instead of PARLEY_TOKEN)");
    process.exit(2);
  }
  await run({
    url: process.env["PARLEY_URL"] || "http://127.0.0.1:7700",
    token, agent, conversation,
    turns: values.turns === undefined ? undefined : Number(values.turns),
    log: (line) => console.log(line),
  });
}
