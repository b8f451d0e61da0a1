// The A2A bridge against @a2a-js/sdk's own server: an agent written with
// the SDK (an AgentExecutor behind DefaultRequestHandler, mounted with its
// Express handlers on loopback) answers as the Parley agent "jsagent"
// through `parley a2a-bridge`, and a prompt asked over Parley's HTTP API
// gets its streamed answer as one message; a stop in Parley reaches the
// executor's cancelTask; a question the agent asks (input-required) is
// answered by a person in Parley and goes back into the same task.

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
let server: Server;
let bridge: ChildProcess;
let bridgeLog = "";

beforeAll(async () => {
  const app = express();
  server = app.listen(0, "127.0.0.1");
  await new Promise<void>((r) => server.once("listening", () => r()));
  const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const card: AgentCard = {
    name: "JS SDK agent",
    description: "Streams its answer in artifact chunks; honours cancelTask.",
    supportedInterfaces: [{ url: base + "/", protocolBinding: "JSONRPC", tenant: "", protocolVersion: A2A_PROTOCOL_VERSION }],
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
  app.use(`/${AGENT_CARD_PATH}`, agentCardHandler({ agentCardProvider: requestHandler }));
  app.use(jsonRpcHandler({ requestHandler, userBuilder: UserBuilder.noAuthentication }));

  bridge = spawn(inject("parleyBinary"), ["a2a-bridge", "-server", url(), "-token", admin(), "-agent", agent, "-remote", base], { stdio: ["ignore", "ignore", "pipe"] });
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("the bridge did not start within 10 s:\n" + bridgeLog)), 10_000);
    bridge.stderr!.on("data", (b: Buffer) => {
      bridgeLog += b.toString();
      if (bridgeLog.includes("answers as")) {
        clearTimeout(timer);
        resolve();
      }
    });
    bridge.once("exit", (code) => reject(new Error(`the bridge exited with ${code}:\n${bridgeLog}`)));
  });
});

afterAll(async () => {
  if (bridge && bridge.exitCode === null) {
    const exited = new Promise((r) => bridge.once("exit", r));
    bridge.kill("SIGTERM");
    await exited;
  }
  await new Promise((r) => server?.close(r));
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

const answers = async (id: string): Promise<Message[]> =>
  (await get<{ messages: Message[] }>(conv(id, `/messages?agentId=${agent}`))).messages;

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
