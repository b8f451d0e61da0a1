// The HTTP calls against the real server.

import { createWriteStream, mkdtempSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Readable } from "node:stream";
import { pipeline } from "node:stream/promises";
import type { ReadableStream as NodeWebStream } from "node:stream/web";
import { describe, expect, inject, it } from "vitest";
import { backupOf } from "../src/backup.js";
import { ParleyClient, ParleyError, follow, type FetchLike } from "../src/index.js";
import { NodeWebSocket, Runner, conversation, shared, until } from "./helpers.js";
import { startServer } from "./server.js";

describe("conversations", () => {
  it("creates, reads and lists them page by page", async () => {
    const c = shared();
    const made: string[] = [];
    for (let i = 0; i < 3; i++) made.push((await c.createConversation({ title: `paged ${i}`, participants: ["alice", "bob"] })).conversation.id);
    const v = await c.conversation(made[0]!);
    expect(v.conversation).toMatchObject({ id: made[0], title: "paged 0", participants: ["alice", "bob"], turnPolicy: "round-robin" });
    expect(v.guidance).toMatchObject({ nextAgentId: "alice", kind: "start_turn", turn: 1 });
    const page = await c.listConversations({ limit: 1 });
    expect(page.conversations).toHaveLength(1);
    expect(page.nextCursor).toBeTruthy();
    const second = await c.listConversations({ limit: 1, cursor: page.nextCursor });
    expect(second.conversations[0]!.conversation.id).not.toBe(page.conversations[0]!.conversation.id);
    const all: string[] = [];
    for await (const x of c.conversations({ limit: 2 })) all.push(x.conversation.id);
    expect(all).toEqual(expect.arrayContaining(made));
    expect(new Set(all).size).toBe(all.length);
  });

  it("lists them most recently active first, narrowed by participant, involves and metadata", async () => {
    const c = shared();
    const tag = `flt-${Date.now()}-${Math.random().toString(36).slice(2, 8)}`;
    const make = async (participants: string[], metadata: Record<string, unknown>) =>
      (await c.createConversation({ title: tag, participants, metadata })).conversation.id;
    const red = await make([`${tag}-a`, "bob"], { team: "red", n: 1 });
    const blue = await make([`${tag}-b`], { team: "blue" });
    const ids = async (opts: Parameters<ParleyClient["listConversations"]>[0]) => {
      const got: string[] = [];
      for await (const v of c.conversations({ ...opts, title: tag, limit: 1 })) got.push(v.conversation.id);
      return got;
    };
    expect(await ids({})).toEqual([blue, red]);
    await c.postMessage(red, { agentId: "bob", content: "moves it up" });
    expect(await ids({})).toEqual([red, blue]);
    expect(await ids({ participant: `${tag}-b` })).toEqual([blue]);
    expect(await ids({ involves: `${tag}-a` })).toEqual([red]);
    expect(await ids({ metadata: { team: "red" } })).toEqual([red]);
    expect(await ids({ metadata: { team: "red", n: "1" } })).toEqual([]);
    await expect(c.listConversations({ metadata: { a: "1", b: "2", c: "3", d: "4", e: "5" } })).rejects.toMatchObject({ status: 422, code: "invalid_value" });
  });

  it("sends every body as application/json, which an open server requires", async () => {
    const seen: (string | null)[] = [];
    const spy: FetchLike = (input, init) => {
      seen.push(new Headers(init?.headers).get("Content-Type"));
      return fetch(input, init);
    };
    const c = new ParleyClient({ baseUrl: inject("serverUrl"), fetch: spy });
    const id = await conversation(c);
    await c.postMessage(id, { agentId: "carol", content: "hi" });
    await c.conversation(id);
    expect(seen).toEqual(["application/json", "application/json", null]);
    // The same body sent as text/plain, as a web page may post anywhere, is refused.
    const res = await fetch(inject("serverUrl") + `/v1/conversations/${id}/messages`, {
      method: "POST",
      headers: { "Content-Type": "text/plain" },
      body: JSON.stringify({ agentId: "carol", content: "hi" }),
    });
    expect(res.status).toBe(415);
  });
});

describe("updateConversation", () => {
  it("changes a conversation, answers its view, and a live follower folds the change", async () => {
    const c = new ParleyClient({ baseUrl: inject("serverUrl"), WebSocket: NodeWebSocket });
    const id = (await c.createConversation({ title: "before", participants: ["alice", "bob"], metadata: { k: 1, drop: true } })).conversation.id;
    const live = follow(c, id, { transport: "sse" });
    try {
      await until(() => live.getSnapshot().status.state === "live", "the stream");
      const v = await c.updateConversation(id, { title: "after", metadata: { drop: null, more: 2 }, participants: { add: ["carol"], remove: ["alice"] }, members: { add: ["dave"] } });
      expect(v.conversation).toMatchObject({ id, title: "after", metadata: { k: 1, more: 2 }, participants: ["bob", "carol"], members: ["dave"] });
      expect(await c.conversation(id)).toEqual(v);
      await until(() => live.getSnapshot().state.conversation?.title === "after", "the folded change");
      expect(live.getSnapshot().state.conversation).toEqual(v.conversation);
      const events = await c.events(id, { after: 0 });
      expect(events.events.at(-1)).toMatchObject({ type: "conversation.updated", data: { title: "after", participants: ["bob", "carol"], members: ["dave"] } });
      // A patch that changes nothing writes nothing; one that names a fixed field is refused.
      const same = await c.updateConversation(id, { title: "after" });
      expect(same.head.lastSeq).toBe(v.head.lastSeq);
      const err = await c.updateConversation(id, { turnPolicy: "free" } as never).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(ParleyError);
      expect((err as ParleyError).code).toBe("invalid_value");
    } finally {
      live.close();
      await live.done;
    }
  });
});

describe("messages and events", () => {
  it("pages messages and events, filters, reads a message, its replies and its thread", async () => {
    const c = shared();
    const id = await conversation(c);
    const q = await c.postMessage(id, { agentId: "human", role: "user", content: "question", finality: "turn" });
    const a = await c.postMessage(id, { agentId: "alice", content: "answer", replyTo: q.message.id, finality: "turn" });
    for (let i = 0; i < 4; i++) await c.postMessage(id, { agentId: "bob", content: `more ${i}`, replyTo: a.message.id, finality: "turn" });
    const page = await c.messages(id, { limit: 2 });
    expect(page.messages.map((m) => m.content)).toEqual(["question", "answer"]);
    expect(page.nextAfter).toBe(page.messages[1]!.seq);
    const rest = await c.messages(id, { after: page.nextAfter, limit: 100 });
    expect(rest.messages).toHaveLength(4);
    expect(rest.nextAfter).toBeUndefined();
    const every: string[] = [];
    for await (const m of c.allMessages(id, { limit: 2 })) every.push(m.content);
    expect(every).toHaveLength(6);
    expect((await c.messages(id, { agentId: "bob" })).messages).toHaveLength(4);
    expect((await c.messages(id, { turnId: q.message.id })).messages.length).toBeGreaterThanOrEqual(2);
    expect(await c.message(id, a.message.id)).toMatchObject({ id: a.message.id, content: "answer", replyTo: q.message.id, depth: 1 });
    const replies = await c.replies(id, a.message.id, { limit: 3 });
    expect(replies.messages).toHaveLength(3);
    expect(replies.nextAfter).toBeDefined();
    const t = await c.thread(id, rest.messages[0]!.id);
    expect(t.root.id).toBe(q.message.id);
    expect(t.ancestors.map((m) => m.id)).toEqual([q.message.id, a.message.id]);
    const events = await c.events(id, { after: 0, limit: 3 });
    expect(events.events.map((e) => e.seq)).toEqual([1, 2, 3]);
    expect(events.events[0]!.type).toBe("conversation.created");
    expect(events.nextAfter).toBe(3);
    const trace = await c.postTrace(id, { agentId: "alice", payload: { tool: "grep" } });
    expect(trace.event).toMatchObject({ type: "trace", data: { payload: { tool: "grep" } } });
  });

  it("replays a write with the same idempotency key", async () => {
    const c = shared();
    const id = await conversation(c);
    const one = await c.postMessage(id, { agentId: "carol", content: "once" }, { idempotencyKey: "k-1" });
    const two = await c.postMessage(id, { agentId: "carol", content: "once" }, { idempotencyKey: "k-1" });
    expect(two).toEqual(one);
    await expect(c.postMessage(id, { agentId: "carol", content: "other" }, { idempotencyKey: "k-1" })).rejects.toMatchObject({
      status: 422,
      code: "idempotency_mismatch",
    });
  });
});

describe("errors", () => {
  it("are ParleyErrors with status, code, message, head and details", async () => {
    const c = shared();
    const id = (await c.createConversation({ participants: ["alice", "bob"] })).conversation.id;
    await c.postMessage(id, { agentId: "alice", content: "mine" });
    const err = await c.postMessage(id, { agentId: "bob", content: "no" }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ParleyError);
    expect(err).toMatchObject({ status: 409, code: "turn_conflict" });
    expect((err as ParleyError).message).toContain("alice");
    expect((err as ParleyError).head).toMatchObject({ openTurn: { owner: "alice" } });
    await expect(c.conversation("nope")).rejects.toMatchObject({ status: 404, code: "not_found" });
    await expect(c.messages(id, { limit: 5000 })).rejects.toMatchObject({ status: 422, code: "invalid_value" });
    await expect(c.createConversation({ turnPolicy: "sideways" as "free" })).rejects.toMatchObject({ status: 422 });
  });

  it("carry the queue's length when the prompt queue is full", async () => {
    const server = await startServer(inject("parleyBinary"), { args: ["-max-queued-prompts", "2"] });
    try {
      const c = new ParleyClient({ baseUrl: server.url });
      const id = await conversation(c);
      await c.prompt(id, { agentId: "human", content: "one" });
      await c.prompt(id, { agentId: "human", content: "two" });
      const err = (await c.prompt(id, { agentId: "human", content: "three" }).catch((e: unknown) => e)) as ParleyError;
      expect(err).toMatchObject({ status: 409, code: "busy", queueLength: 2, maxQueueLength: 2 });
      expect(err.details).toMatchObject({ queueLength: 2, maxQueueLength: 2 });
      expect(err.head).toBeDefined();
    } finally {
      await server.stop();
    }
  });
});

describe("turns", () => {
  it("claims, resets and aborts", async () => {
    const c = shared();
    const id = (await c.createConversation({ participants: ["alice", "bob"] })).conversation.id;
    const claim = await c.claim(id, { agentId: "alice", expectTurn: 1, ttlMs: 60_000 });
    expect(claim).toMatchObject({ turn: 1, claimed: true, written: true, claim: { agentId: "alice", turn: 1 } });
    await expect(c.claim(id, { agentId: "bob" })).rejects.toMatchObject({ code: "claim_conflict" });
    await c.postMessage(id, { agentId: "alice", content: "thinking" });
    expect(await c.reset(id, { agentId: "alice" })).toMatchObject({ turn: 1, wasReset: true });
    await c.delegate(id, { agentId: "alice", to: "alice.worker" });
    const aborted = await c.abortTurn(id, { agentId: "alice", reason: "tool crashed" });
    expect(aborted).toMatchObject({ written: true, head: { openTurn: null } });
    expect(aborted.guidance).toMatchObject({ nextAgentId: "bob", turn: 2 });
  });
});

describe("prompts", () => {
  it("queues, lists, promotes, withdraws, stops the answer and reverts", async () => {
    const c = shared();
    const id = await conversation(c);
    const a = await c.prompt(id, { agentId: "human", content: "first" });
    const b = await c.prompt(id, { agentId: "human", content: "second", mode: "followup" });
    const third = await c.prompt(id, { agentId: "human", content: "third ü" });
    await expect(c.prompt(id, { agentId: "human", content: "never", mode: "reject" })).rejects.toMatchObject({ status: 409, code: "busy" });
    await c.promotePrompt(id, b.id, { agentId: "human" });
    expect((await c.prompts(id)).map((p) => p.id)[0]).toBe(b.id);
    await c.withdrawPrompt(id, a.id, { agentId: "human" });
    const q = await c.promptQueue(id);
    expect(q.exact).toBe(true);
    expect(q.asOf).toBe((await c.conversation(id)).head.lastSeq);
    expect(q.prompts.map((p) => p.content)).toEqual(["second", "third ü"]);
    await expect(c.stop(id)).rejects.toMatchObject({ status: 404 }); // nothing is being answered
    const run = await Runner.connect(inject("serverUrl"), id, "alice");
    try {
      await until(() => run.pushes.some((p) => p["type"] === "prompt"), "a prompt for the runner");
      await run.create("r1");
      await run.text("r1", "partial");
      // A stop of a prompt that waits stops nothing, and names the one answered.
      await expect(c.stop(id, { promptId: third.id })).rejects.toMatchObject({
        status: 409,
        code: "not_answering",
        details: { answering: { promptId: b.id, messageId: "r1" } },
      });
      expect(await c.stop(id, { promptId: b.id })).toEqual({ status: "aborting", promptId: b.id, messageId: "r1" });
      await until(() => run.pushes.some((p) => p["type"] === "abort"), "the abort");
      const reverted = await c.revert(id, { agentId: "human", messageId: "r1" });
      expect(reverted.removed).toEqual(["r1"]);
      expect((await c.messages(id)).messages.map((m) => m.id)).not.toContain("r1");
    } finally {
      run.close();
    }
  });
});

describe("export", () => {
  it("gives a conversation as Markdown, JSON and JSON Lines", async () => {
    const c = shared();
    const id = await conversation(c, "exported");
    await c.postMessage(id, { agentId: "carol", content: "hello export" });
    const md = await c.exportText(id, "markdown");
    expect(md).toContain("hello export");
    const blob = await c.exportConversation(id, "json");
    expect(blob.type).toContain("application/json");
    expect((JSON.parse(await blob.text()) as { conversation: { id: string } }).conversation.id).toBe(id);
    const lines = (await c.exportText(id, "jsonl")).trim().split("\n");
    expect(lines.length).toBeGreaterThan(1);
    for (const l of lines) expect(() => JSON.parse(l) as unknown).not.toThrow();
    await expect(c.exportText(id, "pdf" as "json")).rejects.toMatchObject({ status: 422 });
  });
});

describe("import", () => {
  it("reads the warnings of an import of legacy rows as the server sends them", async () => {
    const c = shared();
    const id = `legacy-${Date.now()}`;
    const rows = [
      { agentId: "a1", role: "user", sender: "human", content: "Hello", messageId: "msg-1", createdAt: "2025-10-25T10:00:00Z" },
      { agentId: "a1", role: "assistant", sender: "a1", content: "Hi", messageId: "msg-2", replyToMessageId: "msg-9", createdAt: "2025-10-25T10:00:01Z" },
      { agentId: "a1", role: "assistant", sender: "a1", content: "again", createdAt: "2025-10-25T10:00:02Z", replyToMessageId: "msg-1" },
    ];
    const res = await c.importConversation(rows.map((r) => JSON.stringify(r)).join("\n"), { id, participants: ["human", "a1"] });
    expect(res.source).toBe("legacy");
    expect(res.conversation.id).toBe(id);
    expect(res.messages).toBe(3);
    // Each warning is {row, kind, messageId?, text}: the row it is about, what was found, the
    // message concerned, and a sentence for people.
    expect(res.warnings.map(({ row, kind, messageId }) => ({ row, kind, messageId }))).toEqual([
      { row: 2, kind: "missing-parent", messageId: "msg-2" },
      { row: 3, kind: "no-id", messageId: "legacy-3" },
    ]);
    for (const w of res.warnings) expect(w.text).toMatch(/\w+ \w+/);
    expect(res.warnings[0]!.text).toContain("msg-9");
    expect(res.warningCounts).toEqual({ "missing-parent": 1, "no-id": 1 });
    expect(res.warningsTruncated).toBe(false);
    const imported = await c.messages(id);
    expect(imported.messages.map((m) => m.id)).toEqual(["msg-1", "msg-2", "legacy-3"]);
  });
});

describe("backup", () => {
  it("streams the whole store to a file that a server serves again; only an admin may", async () => {
    const server = await startServer(inject("parleyBinary"));
    const dir = mkdtempSync(join(tmpdir(), "parley-backup-"));
    let copy: Awaited<ReturnType<typeof startServer>> | undefined;
    try {
      const admin = await new ParleyClient({ baseUrl: server.url }).createToken({ kind: "admin" });
      const c = new ParleyClient({ baseUrl: server.url, token: admin.token });
      const alice = await c.createToken({ kind: "agent", agentId: "alice" });
      const { conversation: made } = await c.createConversation({ id: "kept", participants: ["alice"] });
      await c.postMessage(made.id, { agentId: "alice", content: "worth keeping" });

      const b = await c.backup();
      expect(b.filename).toMatch(/^parley-\d{8}T\d{6}Z\.db$/);
      const path = join(dir, b.filename);
      await pipeline(Readable.fromWeb(b.body as NodeWebStream), createWriteStream(path));
      expect(statSync(path).size).toBe(b.size);
      expect(readFileSync(path).subarray(0, 16).toString("latin1")).toBe("SQLite format 3\0");

      await expect(new ParleyClient({ baseUrl: server.url, token: alice.token }).backup()).rejects.toMatchObject({ status: 403, code: "forbidden" });

      // The file is the store: a server started on it holds the conversation.
      copy = await startServer(inject("parleyBinary"), { db: path });
      const again = new ParleyClient({ baseUrl: copy.url, token: admin.token });
      expect((await again.messages("kept")).messages.map((m) => m.content)).toEqual(["worth keeping"]);
    } finally {
      await copy?.stop();
      await server.stop();
      rmSync(dir, { recursive: true, force: true });
    }
  });

  it("fails a copy cut short of the size the server announced", async () => {
    const cut = backupOf(new Response("SQLite", { headers: { "Content-Length": "4096" } }));
    await expect(new Response(cut.body).arrayBuffer()).rejects.toThrow("the backup ended after 6 of 4096 bytes");
    const whole = backupOf(new Response("SQLite", { headers: { "Content-Length": "6" } }));
    expect(new TextDecoder().decode(await new Response(whole.body).arrayBuffer())).toBe("SQLite");
  });
});

describe("identity", () => {
  it("says who a token acts as, and when the server runs open", async () => {
    const server = await startServer(inject("parleyBinary"));
    try {
      const open = new ParleyClient({ baseUrl: server.url });
      expect(await open.whoami()).toEqual({ kind: "admin", agentId: "", open: true, cookie: false });
      // The first token ends open mode: the tokens say who acts from now on.
      const admin = await open.createToken({ kind: "admin" });
      const as = (token: string | undefined) => new ParleyClient({ baseUrl: server.url, token });
      expect(await as(admin.token).whoami()).toEqual({ kind: "admin", agentId: "", open: false, cookie: false });
      const alice = await as(admin.token).createToken({ kind: "agent", agentId: "alice" });
      const viewer = await as(admin.token).createToken({ kind: "viewer" });
      expect(await as(alice.token).whoami()).toEqual({ kind: "agent", agentId: "alice", open: false, cookie: false });
      expect(await as(viewer.token).whoami()).toEqual({ kind: "viewer", agentId: "", open: false, cookie: false });
      await expect(as(undefined).whoami()).rejects.toMatchObject({ status: 401, code: "unauthorized" });
      await expect(as("pk_wrong").whoami()).rejects.toMatchObject({ status: 401 });
    } finally {
      await server.stop();
    }
  });

  it("shows when a conversation last changed", async () => {
    const c = shared();
    const id = await conversation(c);
    const before = Date.now();
    await c.postMessage(id, { agentId: "alice", content: "now" });
    const at = Date.parse((await c.conversation(id)).head.lastEventAt ?? "");
    expect(at).toBeGreaterThanOrEqual(before - 1000);
    expect(at).toBeLessThanOrEqual(Date.now() + 1000);
  });
});

describe("search", () => {
  it("finds messages by their text, best first, page by page, with the words found marked", async () => {
    const c = shared();
    const word = "ptarmigan" + Math.random().toString(36).slice(2, 8).replace(/[0-9]/g, "x");
    const id = await conversation(c, "birds");
    const other = await conversation(c, "elsewhere");
    for (let i = 0; i < 4; i++) await c.postMessage(id, { id: `s${i}`, agentId: "alice", content: `a ${(word + " ").repeat(i + 1)}in the snow <b>` });
    await c.postMessage(other, { id: "far", agentId: "bob", content: `another ${word}` });
    const first = await c.search({ q: word.toUpperCase(), conversationId: id, limit: 2 });
    expect(first.hits.map((h) => h.messageId)).toEqual(["s3", "s2"]);
    expect(first.nextCursor).toBeTruthy();
    const hit = first.hits[0]!;
    expect(hit).toMatchObject({ conversationId: id, conversationTitle: "birds", agentId: "alice", role: "assistant" });
    expect(hit.rank).toBeGreaterThan(first.hits[1]!.rank);
    expect(hit.snippet.filter((p) => p.match).map((p) => p.text)).toContain(word);
    expect(hit.snippet.map((p) => p.text).join("")).toContain("<b>"); // markup is text
    const all: string[] = [];
    for await (const h of c.searchAll({ q: word, conversationId: id, limit: 2 })) all.push(h.messageId);
    expect(all).toEqual(["s3", "s2", "s1", "s0"]);
    const everywhere = await c.search({ q: word });
    expect(everywhere.hits.map((h) => h.messageId).sort()).toEqual(["far", "s0", "s1", "s2", "s3"]);
    expect((await c.search({ q: `"${word} in the snow"` })).hits.map((h) => h.messageId).sort()).toEqual(["s0", "s1", "s2", "s3"]);
    await expect(c.search({ q: "" })).rejects.toMatchObject({ status: 400, code: "invalid_request" });
    await expect(c.search({ q: word, limit: 101 })).rejects.toMatchObject({ status: 422, code: "invalid_value" });
    await expect(c.search({ q: "other", cursor: first.nextCursor })).rejects.toMatchObject({ status: 400 });
  });

  it("finds for an agent only what its conversations hold", async () => {
    const server = await startServer(inject("parleyBinary"));
    try {
      const open = new ParleyClient({ baseUrl: server.url });
      const admin = new ParleyClient({ baseUrl: server.url, token: (await open.createToken({ kind: "admin" })).token });
      const alice = new ParleyClient({ baseUrl: server.url, token: (await admin.createToken({ kind: "agent", agentId: "alice" })).token });
      const ours = (await admin.createConversation({ participants: ["alice"], turnPolicy: "free" })).conversation.id;
      const theirs = (await admin.createConversation({ participants: ["carol"], turnPolicy: "free" })).conversation.id;
      await admin.postMessage(ours, { id: "mine", agentId: "alice", content: "the walrus" });
      await admin.postMessage(theirs, { id: "hers", agentId: "carol", content: "the walrus too" });
      expect((await alice.search({ q: "walrus" })).hits.map((h) => h.messageId)).toEqual(["mine"]);
      expect((await admin.search({ q: "walrus" })).hits.map((h) => h.messageId).sort()).toEqual(["hers", "mine"]);
      await expect(alice.search({ q: "walrus", conversationId: theirs })).rejects.toMatchObject({ status: 403, code: "forbidden" });
    } finally {
      await server.stop();
    }
  });
});
