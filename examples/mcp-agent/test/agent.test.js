// @ts-check
// The example against a real Parley server: it builds the parley binary,
// serves with tokens, and runs agent.js as its README says, with an agent
// token; a person writes, and the agent answers in its turn, twice, then
// stops (--turns 2).

import { execFileSync, spawn } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

const here = import.meta.dirname;
/** @type {import("node:child_process").ChildProcess} */
let server;
let dir = "", url = "", admin = "";

before(async () => {
  dir = mkdtempSync(join(tmpdir(), "parley-mcp-agent-"));
  const binary = join(dir, "parley");
  execFileSync("go", ["build", "-o", binary, "./cmd/parley"], { cwd: resolve(here, "../../.."), stdio: "inherit" });
  const child = spawn(binary, ["serve", "-db", join(dir, "parley.db"), "-addr", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
  server = child;
  let log = "";
  const addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("parley did not start within 20 s:\n" + log)), 20_000);
    child.stderr?.on("data", (/** @type {Buffer} */ b) => {
      log += b.toString();
      const m = /msg="parley serving" addr=(\S+)/.exec(log);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
    child.once("exit", (code) => reject(new Error(`parley exited with ${code}:\n${log}`)));
  });
  url = "http://" + addr;
  admin = (await api("POST", "/v1/tokens", { kind: "admin" }, "")).token; // the first token ends the open mode
});

after(async () => {
  if (server && server.exitCode === null) {
    const exited = new Promise((r) => server.once("exit", r));
    server.kill("SIGTERM");
    await exited;
  }
  rmSync(dir, { recursive: true, force: true });
});

/**
 * Calls Parley's HTTP API (as the admin, unless auth says otherwise); the JSON answer.
 * @param {string} method
 * @param {string} path
 * @param {object | undefined} body
 * @param {string} [auth]
 * @returns {Promise<any>}
 */
async function api(method, path, body, auth = admin) {
  const r = await fetch(url + path, {
    method,
    headers: { "Content-Type": "application/json", ...(auth ? { Authorization: "Bearer " + auth } : {}) },
    body: body && JSON.stringify(body),
  });
  if (!r.ok) throw new Error(`${method} ${path}: ${r.status} ${await r.text()}`);
  return r.json();
}

/** @typedef {{ agentId: string, content: string, finality: string }} Message */

/**
 * The messages of conversation id, once ok holds for them (within 20 s).
 * @param {string} id
 * @param {(ms: Message[]) => boolean} ok
 * @returns {Promise<Message[]>}
 */
async function messagesOnce(id, ok) {
  for (const end = Date.now() + 20_000; ; ) {
    const { messages } = await api("GET", `/v1/conversations/${id}/messages`, undefined);
    if (ok(messages)) return messages;
    if (Date.now() > end) throw new Error("not in time; the messages: " + JSON.stringify(messages, null, 1));
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("the agent waits for its turn and answers, through MCP only", async () => {
  const token = (await api("POST", "/v1/tokens", { kind: "agent", agentId: "reviewer" })).token;
  const id = (await api("POST", "/v1/conversations", { title: "mcp agent example", participants: ["alice", "reviewer"] })).conversation.id;
  const agent = spawn(process.execPath, [join(here, "..", "agent.js"), id, "--turns", "2"], {
    env: { ...process.env, PARLEY_URL: url, PARLEY_TOKEN: token },
    stdio: ["ignore", "pipe", "inherit"],
  });
  let out = "";
  agent.stdout?.on("data", (/** @type {Buffer} */ b) => (out += b.toString()));
  const exited = new Promise((r) => agent.once("exit", r));
  try {
    const reviews = (/** @type {{ agentId: string }[]} */ ms) => ms.filter((m) => m.agentId === "reviewer");
    // alice ends her turn: the turn policy (round-robin) names the reviewer.
    await api("POST", `/v1/conversations/${id}/messages`, { agentId: "alice", content: "Is v2 ready to ship?", finality: "turn" });
    await messagesOnce(id, (ms) => reviews(ms).length === 1);
    await api("POST", `/v1/conversations/${id}/messages`, { agentId: "alice", content: "And the release notes?", finality: "turn" });
    const ms = await messagesOnce(id, (ms) => reviews(ms).length === 2);
    assert.deepEqual(
      ms.map((m) => [m.agentId, m.content, m.finality]),
      [
        ["alice", "Is v2 ready to ship?", "turn"],
        ["reviewer", "Reviewed alice's “Is v2 ready to ship?”: looks good to me.", "turn"],
        ["alice", "And the release notes?", "turn"],
        ["reviewer", "Reviewed alice's “And the release notes?”: looks good to me.", "turn"],
      ],
    );
    assert.equal(await exited, 0, "the agent stops after its two turns");
    assert.match(out, /^turn 2: Reviewed alice's/m);
    // It held no runner: nobody answers the conversation's prompts.
    const v = await api("GET", `/v1/conversations/${id}`, undefined);
    assert.deepEqual(v.guidance.runners ?? [], []);
  } finally {
    agent.kill();
  }
});
