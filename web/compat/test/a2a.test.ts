// A2A against Parley: the real @a2a-js/sdk client (1.0, through
// ClientFactory and the agent card), and its 0.3 transport
// (LegacyJsonRpcTransport), against the agent "helper" at
// /v1/a2a/helper, with the tests' runner answering as helper.

import { ClientFactory, ClientFactoryOptions, DefaultAgentCardResolver, JsonRpcTransportFactory, type Client } from "@a2a-js/sdk/client";
import { LegacyJsonRpcTransport } from "@a2a-js/sdk/compat/v0_3/client";
import { expect, test } from "vitest";
import { Runner, scriptedAnswer } from "./runner.js";
import { admin, newId, stored, url, you } from "./stored.js";

/** fetch as the agent "you". */
const authed: typeof fetch = (input, init) => {
  const headers = new Headers(init?.headers);
  headers.set("Authorization", "Bearer " + you());
  return fetch(input, { ...init, headers });
};

const endpoint = (): string => url() + "/v1/a2a/helper";

/** A 1.0 client made from helper's card (the base URL ends with a slash: the card is below it). */
async function client(): Promise<Client> {
  const factory = new ClientFactory(
    ClientFactoryOptions.createFrom(ClientFactoryOptions.default, {
      transports: [new JsonRpcTransportFactory({ fetchImpl: authed })],
      cardResolver: new DefaultAgentCardResolver({ fetchImpl: authed }),
    }),
  );
  return factory.createFromUrl(endpoint() + "/");
}

/** A conversation of "you" with helper, and helper's runner attached to it. */
async function conversation(): Promise<{ id: string; run: Runner }> {
  const id = newId("ctx");
  const r = await fetch(url() + "/v1/conversations", {
    method: "POST",
    headers: { "Content-Type": "application/json", Authorization: "Bearer " + you() },
    body: JSON.stringify({ id, participants: ["helper"] }),
  });
  expect(r.status).toBe(201);
  return { id, run: await Runner.attach(url(), admin(), id) };
}

// The SDK's types are proto's: every field present.
const message = (contextId: string, text: string, taskId = "") => ({
  messageId: newId("m"),
  contextId,
  taskId,
  role: 1 /* ROLE_USER */,
  parts: [{ content: { $case: "text" as const, value: text }, metadata: undefined, filename: "", mediaType: "" }],
  metadata: undefined,
  extensions: [],
  referenceTaskIds: [],
});

type Ev = { payload?: { $case: string; value: Record<string, unknown> } };

/** An event as the test compares it: its kind, and its state or artifact text. */
function kind(e: Ev): string {
  const p = e.payload!;
  const v = p.value;
  if (p.$case === "task" || p.$case === "statusUpdate") return `${p.$case} ${(v["status"] as { state: number }).state}`;
  if (p.$case === "artifactUpdate") {
    const a = v["artifact"] as { artifactId: string; parts: { content?: { $case: string; value: unknown } }[] };
    const c = a.parts[0]?.content;
    return `artifact ${a.artifactId} ${c?.$case === "text" ? JSON.stringify(c.value) : JSON.stringify((c?.value as { state: string }).state)}`;
  }
  return p.$case;
}

/** The Parley position an event carries in its metadata. */
const position = (e: Ev): string => ((e.payload!.value["metadata"] as { parley: { position: string } }).parley.position);

test("ClientFactory reads the card and sends: the task completes with the runner's text", async () => {
  const c = await client();
  const card = await c.getAgentCard();
  expect(card.name).toBe("helper");
  const { id, run } = await conversation();
  const sending = c.sendMessage({ tenant: "", message: message(id, "What is 6 x 7?"), configuration: undefined, metadata: undefined });
  expect((await run.next())["content"]).toBe("What is 6 x 7?");
  for (const f of scriptedAnswer("r1")) await run.send(f);
  // The client answers the Task (or a Message) itself.
  const task = (await sending) as unknown as { id: string; contextId: string; status: { state: number }; artifacts: { parts: { content?: { $case: string; value: unknown } }[] }[] };
  expect(task.contextId).toBe(id);
  expect(task.status.state).toBe(3); // completed
  const text = task.artifacts.flatMap((a) => a.parts.filter((p) => p.content?.$case === "text").map((p) => p.content!.value as string)).join("");
  expect(text).toBe((await stored(id, "r1")).content);
  const got = await c.getTask({ tenant: "", id: task.id, historyLength: undefined });
  expect(got.status?.state).toBe(3);
  run.close();
});

test("a stream cut and resumed with Last-Event-ID loses nothing and repeats nothing", async () => {
  const c = await client();
  const { id, run } = await conversation();
  const ctl = new AbortController();
  const stream = c.sendMessageStream({ tenant: "", message: message(id, "What is 6 x 7?"), configuration: undefined, metadata: undefined }, { signal: ctl.signal });
  const first: Ev[] = [];
  const reading = (async () => {
    for await (const e of stream) {
      first.push(e as Ev);
      if (first.length === 4) {
        ctl.abort();
        break;
      }
    }
  })().catch(() => undefined);
  expect((await run.next())["content"]).toBe("What is 6 x 7?");
  for (const f of scriptedAnswer("r1")) await run.send(f);
  await reading;
  expect(first).toHaveLength(4);
  const taskId = (first[0]!.payload!.value as { id: string }).id;
  const rest: Ev[] = [];
  for await (const e of c.resubscribeTask({ tenant: "", id: taskId }, { serviceParameters: { "Last-Event-ID": position(first[3]!) } })) rest.push(e as Ev);
  // The whole stream again, from before its start, for comparison.
  const whole: Ev[] = [];
  for await (const e of c.resubscribeTask({ tenant: "", id: taskId }, { serviceParameters: { "Last-Event-ID": position(first[0]!).replace(/:\d+(:\d+)?$/, ":0") } })) whole.push(e as Ev);
  expect(rest.length).toBeGreaterThan(0);
  expect([...first, ...rest].map(kind)).toEqual(whole.map(kind));
  expect([...first, ...rest].map(position)).toEqual(whole.map(position));
  expect(rest.at(-1) && kind(rest.at(-1)!)).toBe("statusUpdate 3");
  const text = [...first, ...rest]
    .filter((e) => e.payload!.$case === "artifactUpdate")
    .map((e) => (e.payload!.value["artifact"] as { parts: { content?: { $case: string; value: unknown } }[] }).parts[0]?.content)
    .filter((p) => p?.$case === "text")
    .map((p) => p!.value as string)
    .join("");
  expect(text).toBe((await stored(id, "r1")).content);
  run.close();
});

test("CancelTask stops the answer under way: the task ends canceled", async () => {
  const c = await client();
  const { id, run } = await conversation();
  const stream = c.sendMessageStream({ tenant: "", message: message(id, "Take your time"), configuration: undefined, metadata: undefined });
  const seen: Ev[] = [];
  const reading = (async () => {
    for await (const e of stream) seen.push(e as Ev);
  })();
  await run.next();
  await run.send({ type: "message.create", turnId: "r1" });
  await run.send({ type: "message.part.text-delta", turnId: "r1", delta: "Thinking" });
  while (seen.length < 3) await new Promise((r) => setTimeout(r, 20));
  const taskId = (seen[0]!.payload!.value as { id: string }).id;
  const canceling = c.cancelTask({ tenant: "", id: taskId, metadata: undefined });
  expect((await run.next())["type"]).toBe("abort");
  await run.send({ type: "aborted" });
  expect((await canceling).status?.state).toBe(5); // canceled
  await reading;
  expect(kind(seen.at(-1)!)).toBe("statusUpdate 5");
  await expect(c.cancelTask({ tenant: "", id: taskId, metadata: undefined })).rejects.toThrow();
  run.close();
});

test("the 0.3 transport sends and streams in 0.3's JSON", async () => {
  const t = new LegacyJsonRpcTransport({ endpoint: endpoint(), fetchImpl: authed });
  const { id, run } = await conversation();
  const sending = t.sendMessage({ tenant: "", message: message(id, "What is 6 x 7?"), configuration: undefined, metadata: undefined });
  await run.next();
  for (const f of scriptedAnswer("r1")) await run.send(f);
  const res = (await sending) as unknown as { id: string; status: { state: number } };
  expect(res.id).toMatch(/~/);
  expect(res.status.state).toBe(3);
  const events: Ev[] = [];
  const streaming = (async () => {
    for await (const e of t.sendMessageStream({ tenant: "", message: message(id, "And 6 x 8?"), configuration: undefined, metadata: undefined })) events.push(e as Ev);
  })();
  await run.next();
  await run.send({ type: "message.create", turnId: "r2" });
  await run.send({ type: "message.part.text-delta", turnId: "r2", delta: "48." });
  await run.send({ type: "message.finalize", turnId: "r2", reason: "end_turn" });
  await run.send({ type: "complete" });
  await streaming;
  expect(events.map(kind)).toEqual(["task 1", "statusUpdate 2", 'artifact t0 "48."', 'artifact t0 ""', "statusUpdate 3"]);
  run.close();
});
