// The A2A bridge against @a2a-js/sdk's own server: an agent written with
// the SDK (an AgentExecutor behind DefaultRequestHandler, mounted with its
// Express handlers on loopback) answers as the Parley agent "jsagent"
// through `parley a2a-bridge`, and a prompt asked over Parley's HTTP API
// gets its streamed answer as one message; a stop in Parley reaches the
// executor's cancelTask; a question the agent asks (input-required) is
// answered by a person in Parley and goes back into the same task; and an
// agent of the SDK that offers only A2A 0.3 (the SDK's v0.3 compatibility)
// is spoken to in 0.3.

import { spawn, type ChildProcess } from "node:child_process";
import type { AddressInfo } from "node:net";
import type { Server } from "node:http";
import express from "express";
import { randomUUID } from "node:crypto";
import { AGENT_CARD_PATH, A2A_PROTOCOL_VERSION, Role, TaskState, type AgentCard, type Part } from "@a2a-js/sdk";
import {
  AgentEvent,
  DefaultRequestHandler,
  InMemoryTaskStore,
  type AgentExecutor,
  type ExecutionEventBus,
  type RequestContext,
} from "@a2a-js/sdk/server";
import { agentCardHandler, jsonRpcHandler, UserBuilder } from "@a2a-js/sdk/server/express";
import { afterAll, beforeAll, expect, inject, test } from "vitest";
import { admin, get, url, you } from "./stored.js";

const agent = "jsagent";

const text = (value: string): Part => ({ content: { $case: "text", value }, metadata: undefined, filename: "", mediaType: "text/plain" });

/**
 * Answers "long" prompts with a chunk every 50 ms until canceled (at most
 * 400), and others with three chunks of one artifact; every cancelTask it
 * is asked is recorded.
 */
class Executor implements AgentExecutor {
  readonly canceled: string[] = [];
  readonly prompts: { text: string; context: string; task: string; followUp: boolean }[] = [];

  cancelTask = (taskId: string): Promise<void> => {
    this.canceled.push(taskId);
    return Promise.resolve();
  };

  async execute(rc: RequestContext, bus: ExecutionEventBus): Promise<void> {
    const { taskId, contextId } = rc;
    const said = rc.userMessage.parts.map((p) => (p.content?.$case === "text" ? p.content.value : "")).join("");
    this.prompts.push({ text: said, context: contextId, task: taskId, followUp: rc.task !== undefined });
    if (!rc.task) {
      bus.publish(AgentEvent.task({ id: taskId, contextId, status: { state: TaskState.TASK_STATE_SUBMITTED, message: undefined, timestamp: undefined }, artifacts: [], history: [rc.userMessage], metadata: undefined }));
    }
    const status = (state: TaskState): void =>
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state, message: undefined, timestamp: new Date().toISOString() }, metadata: undefined }));
    const chunk = (value: string, append: boolean, lastChunk = false): void =>
      bus.publish(AgentEvent.artifactUpdate({
        taskId, contextId, append, lastChunk, metadata: undefined,
        artifact: { artifactId: "answer", name: "answer", description: "", parts: [text(value)], metadata: undefined, extensions: [] },
      }));
    if (rc.task) {
      // A follow-up (the answer to its question): the task goes on.
      bus.publish(AgentEvent.task(rc.task));
      status(TaskState.TASK_STATE_WORKING);
      chunk(`You chose ${said}.`, false, true);
      status(TaskState.TASK_STATE_COMPLETED);
      return;
    }
    if (said.includes("ask me")) {
      const question = { messageId: randomUUID(), contextId, taskId, role: Role.ROLE_AGENT, parts: [text("Which color?")], metadata: undefined, extensions: [], referenceTaskIds: [] };
      bus.publish(AgentEvent.statusUpdate({ taskId, contextId, status: { state: TaskState.TASK_STATE_INPUT_REQUIRED, message: question, timestamp: new Date().toISOString() }, metadata: undefined }));
      return;
    }
    status(TaskState.TASK_STATE_WORKING);
    const chunks = said.includes("long") ? Array.from({ length: 400 }, (_, i) => `${i + 1} `) : ["The answer ", "is ", "42."];
    for (const [i, c] of chunks.entries()) {
      if (this.canceled.includes(taskId)) {
        status(TaskState.TASK_STATE_CANCELED);
        return;
      }
      chunk(c, i > 0, i === chunks.length - 1);
      await new Promise((r) => setTimeout(r, 50));
    }
    status(TaskState.TASK_STATE_COMPLETED);
  }
}

const executor = new Executor();
const servers: Server[] = [];
const bridges: ChildProcess[] = [];

/**
 * Serves the executor with the SDK's handlers on a loopback port: an
 * agent of A2A 1.0, or (legacy) one whose only interface is 0.3's, with
 * the SDK's v0.3 compatibility on, so that its card is 0.3's too; its URL.
 */
async function serveAgent(legacy: boolean): Promise<string> {
  const app = express();
  const server = app.listen(0, "127.0.0.1");
  servers.push(server);
  await new Promise<void>((r) => server.once("listening", () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card: AgentCard = {
    name: legacy ? "JS SDK agent, 0.3" : "JS SDK agent",
    description: "Streams its answer in artifact chunks; honours cancelTask.",
    supportedInterfaces: [{ url: base + "/", protocolBinding: "JSONRPC", tenant: "", protocolVersion: legacy ? "0.3" : A2A_PROTOCOL_VERSION }],
    provider: undefined,
    version: "1.0.0",
    capabilities: { streaming: true, pushNotifications: false, extensions: [], extendedAgentCard: false },
    securitySchemes: {},
    securityRequirements: [],
    defaultInputModes: ["text"],
    defaultOutputModes: ["text"],
    skills: [],
    signatures: [],
  };
  const requestHandler = new DefaultRequestHandler(card, new InMemoryTaskStore(), executor);
  const legacyCompat = legacy ? { enabled: true } : undefined;
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler, legacyCompat }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication, legacyCompat }));
  return base;
}

/** Starts `parley a2a-bridge` as agent id for the agent at remote; what it printed once it serves. */
async function bridge(id: string, remote: string): Promise<string> {
  const child = spawn(inject("parleyBinary"), ["a2a-bridge", "-server", url(), "-token", admin(), "-agent", id, "-remote", remote], { stdio: ["ignore", "ignore", "pipe"] });
  bridges.push(child);
  let log = "";
  return new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the bridge did not start within 10 s:\n" + log)), 10_000);
    child.stderr.on("data", (b: Buffer) => {
      log += b.toString();
      if (log.includes("answers as")) {
        clearTimeout(timer);
        resolve(log);
      }
    });
    child.once("exit", (code) => reject(new Error(`the bridge exited with ${code}:\n${log}`)));
  });
}

beforeAll(async () => {
  await bridge(agent, await serveAgent(false));
});

afterAll(async () => {
  for (const b of bridges) {
    if (b.exitCode !== null) continue;
    const exited = new Promise((r) => b.once("exit", r));
    b.kill("SIGTERM");
    await exited;
  }
  for (const s of servers) await new Promise((r) => s.close(r));
});

/** POSTs as the agent "you"; the JSON body. */
async function post<T>(path: string, body: object, token = you()): Promise<T> {
  const r = await fetch(url() + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + token },
    body: JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`POST ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

interface PromptStatus { state: string; messageId?: string; reason?: string }
interface Message { id: string; agentId: string; content: string; status: string; parts: { type: string; text?: string; reason?: string }[] }

const conv = (id: string, rest: string): string => `/v1/conversations/${encodeURIComponent(id)}${rest}`;

/** Waits until the prompt ends; its status. */
async function ended(id: string, pid: string): Promise<PromptStatus> {
  for (;;) {
    const s = await get<PromptStatus>(conv(id, `/prompts/${encodeURIComponent(pid)}?wait=10s`));
    if (s.state === "completed" || s.state === "canceled") return s;
  }
}

const answers = async (id: string, by = agent): Promise<Message[]> =>
  (await get<{ messages: Message[] }>(conv(id, `/messages?agentId=${by}`))).messages;

test("a prompt is answered by the @a2a-js/sdk agent, streamed into one message; a stop cancels its task", async () => {
  const { conversation } = await post<{ conversation: { id: string } }>("/v1/conversations", { title: "a2a bridge", participants: ["you", agent] }, admin());
  const id = conversation.id;

  const first = await post<{ id: string }>(conv(id, "/prompts"), { content: "What is the answer?", to: agent });
  const done = await ended(id, first.id);
  expect(done.state).toBe("completed");
  let msgs = await answers(id);
  expect(msgs).toHaveLength(1);
  expect(msgs[0]!.id).toBe(done.messageId);
  expect(msgs[0]!.content).toBe("The answer is 42.");
  expect(msgs[0]!.status).toBe("complete");
  expect(msgs[0]!.parts.filter((p) => p.type === "text").map((p) => p.text)).toEqual(["The answer is 42."]);
  expect(executor.prompts[0]!.text).toBe("What is the answer?");

  // A long answer, stopped in Parley once some of it has come.
  const second = await post<{ id: string }>(conv(id, "/prompts"), { content: "Count, a long way.", to: agent });
  for (;;) {
    msgs = await answers(id);
    if (msgs.length === 2 && msgs[1]!.content.length > 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await post(conv(id, "/abort"), {}, admin());
  const stopped = await ended(id, second.id);
  expect(stopped.state).toBe("canceled");
  expect(executor.canceled).toHaveLength(1);
  msgs = await answers(id);
  expect(msgs).toHaveLength(2);
  const long = msgs[1]!;
  expect(long.status).toBe("canceled");
  expect(long.content).toMatch(/^1 (\d+ )*$/);
  expect(long.content.length).toBeLessThan(400 * 4);
  expect(long.parts.find((p) => p.type === "finish")?.reason).toBe("canceled");
  // The second prompt went in the context of the first answer.
  expect(executor.prompts[1]!.text).toBe("Count, a long way.");
  // (the SDK makes a new context for a message that names none).
  expect(executor.prompts[1]!.context).toBe(executor.prompts[0]!.context);
});

test("the @a2a-js/sdk agent's question is asked in Parley, and the answer goes back into its task", async () => {
  const { conversation } = await post<{ conversation: { id: string } }>("/v1/conversations", { title: "a2a question", participants: ["you", agent] }, admin());
  const id = conversation.id;
  const before = executor.prompts.length;
  const prompt = await post<{ id: string }>(conv(id, "/prompts"), { content: "Paint it; ask me the color.", to: agent });
  let pending: { requestId: string; title: string; agentId: string }[] = [];
  while (pending.length === 0) {
    pending = (await get<{ inputs: typeof pending }>(conv(id, "/inputs?status=pending"))).inputs;
    await new Promise((r) => setTimeout(r, 20));
  }
  expect(pending).toHaveLength(1);
  expect(pending[0]!.title).toBe("Which color?");
  expect(pending[0]!.agentId).toBe(agent);
  await post(conv(id, `/inputs/${encodeURIComponent(pending[0]!.requestId)}`), { agentId: "you", answer: { text: "blue" } }, admin());
  const done = await ended(id, prompt.id);
  expect(done.state).toBe("completed");
  const msgs = await answers(id);
  expect(msgs).toHaveLength(1);
  expect(msgs[0]!.content).toBe("You chose blue.");
  expect(msgs[0]!.status).toBe("complete");
  const [asked, answered] = executor.prompts.slice(before);
  expect(answered).toEqual({ text: "blue", context: asked!.context, task: asked!.task, followUp: true });
});

test("an @a2a-js/sdk agent that speaks only 0.3 (its one interface, through the SDK's v0.3 compatibility) answers through the bridge, and is stopped", async () => {
  const old = "jsold";
  const remote = await serveAgent(true);
  // Asked as a 0.3 client asks (no A2A-Version), the SDK serves its card with 0.3's fields (url) besides its interfaces.
  const card = (await (await fetch(`${remote}/${AGENT_CARD_PATH}`)).json()) as Record<string, unknown>;
  expect(card["url"]).toBe(remote + "/");
  expect(await bridge(old, remote)).toContain("(A2A 0.3, streaming)");
  const { conversation } = await post<{ conversation: { id: string } }>("/v1/conversations", { title: "a2a 0.3", participants: ["you", old] }, admin());
  const id = conversation.id;
  const first = await post<{ id: string }>(conv(id, "/prompts"), { content: "What is the answer?", to: old });
  expect((await ended(id, first.id)).state).toBe("completed");
  let msgs = await answers(id, old);
  expect(msgs.map((m) => [m.content, m.status])).toEqual([["The answer is 42.", "complete"]]);

  const canceled = executor.canceled.length;
  const second = await post<{ id: string }>(conv(id, "/prompts"), { content: "Count, a long way.", to: old });
  for (;;) {
    msgs = await answers(id, old);
    if (msgs.length === 2 && msgs[1]!.content.length > 0) break;
    await new Promise((r) => setTimeout(r, 20));
  }
  await post(conv(id, "/abort"), {}, admin());
  expect((await ended(id, second.id)).state).toBe("canceled");
  expect(executor.canceled.length).toBe(canceled + 1);
  expect((await answers(id, old))[1]!.status).toBe("canceled");
});
