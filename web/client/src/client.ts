// The HTTP calls of docs/api.md.

import { backupOf, type Backup } from "./backup.js";
import type {
  ConversationPage,
  EventPage,
  ExportFormat,
  ImportResult,
  ListConversationsOptions,
  MessagePage,
  MessageResult,
  NewConversation,
  NewMessage,
  NewPrompt,
  NewTask,
  Precondition,
  PromptResult,
  SearchOptions,
  SearchPage,
  Stopped,
  Thread,
  TurnResult,
} from "./bodies.js";
import { ParleyError, responseError } from "./errors.js";
import type { ClientOptions, FetchLike, WebSocketLike } from "./options.js";
import { Subscription, type SubscribeOptions } from "./stream.js";
import type { ConversationPatch, Input, Message, ParleyEvent, PromptStatus, QueuedPrompt, SearchHit, Task, Token, View, WhoAmI } from "./types.js";

type Query = Record<string, string | number | undefined>;

/**
 * A client of one Parley server: each method is one HTTP call (or, for
 * `subscribe`, a live stream). A call that the server refuses rejects with
 * a {@link ParleyError}; one that does not reach it, with the fetch's error.
 */
export class ParleyClient {
  readonly baseUrl: string;
  readonly token: string | undefined;
  /** @internal */
  readonly fetchImpl: FetchLike;
  /** @internal */
  readonly WebSocketImpl: WebSocketLike | undefined;

  constructor(opts: ClientOptions = {}) {
    this.baseUrl = (opts.baseUrl ?? "").replace(/\/+$/, "");
    this.token = opts.token || undefined;
    const f = opts.fetch ?? globalThis.fetch;
    if (typeof f !== "function") throw new TypeError("no fetch: pass one in ClientOptions.fetch");
    this.fetchImpl = opts.fetch ?? ((input, init) => globalThis.fetch(input, init));
    this.WebSocketImpl = opts.WebSocket ?? (globalThis as { WebSocket?: WebSocketLike }).WebSocket;
  }

  // Conversations.

  /**
   * One page of the conversations the token may read, most recently active
   * first (by the time of their last event), narrowed by the filters given.
   */
  listConversations(opts: ListConversationsOptions = {}): Promise<ConversationPage> {
    const q: Query = {
      cursor: opts.cursor,
      limit: opts.limit,
      title: opts.title || undefined,
      participant: opts.participant || undefined,
      involves: opts.involves || undefined,
    };
    for (const [key, value] of Object.entries(opts.metadata ?? {})) q[`metadata.${key}`] = value;
    return this.get("/v1/conversations", q);
  }

  /**
   * Every conversation the token may read that the filters keep, most
   * recently active first, page by page. A conversation that gets an event
   * meanwhile moves to the top: it comes at most once (not at all if not
   * reached yet), and never makes another be skipped or repeated.
   */
  async *conversations(opts: Omit<ListConversationsOptions, "cursor"> = {}): AsyncGenerator<View, void, undefined> {
    let cursor: string | undefined;
    do {
      const page = await this.listConversations({ ...opts, cursor });
      yield* page.conversations;
      cursor = page.nextCursor;
    } while (cursor);
  }

  /** A conversation with its head and guidance. */
  conversation(id: string): Promise<View> {
    return this.get(conv(id));
  }

  /** Creates a conversation. */
  createConversation(body: NewConversation = {}): Promise<View> {
    return this.send("POST", "/v1/conversations", body);
  }

  /**
   * Changes a conversation's title, metadata (a JSON merge patch),
   * participants or members: its owner or an admin may. Answers its view,
   * as {@link conversation} does; a patch that changes nothing writes
   * nothing. Streams see a `conversation.updated` event.
   */
  updateConversation(id: string, patch: ConversationPatch): Promise<View> {
    return this.send("PATCH", conv(id), patch);
  }

  /** Removes a conversation with everything in it (admin). */
  async deleteConversation(id: string): Promise<void> {
    await this.send("DELETE", conv(id));
  }

  // Search.

  /** One page of the messages whose text has `q`, best first, in the conversations the token may read. */
  search(opts: SearchOptions): Promise<SearchPage> {
    return this.get("/v1/search", { q: opts.q, conversationId: opts.conversationId || undefined, limit: opts.limit, cursor: opts.cursor || undefined });
  }

  /** Every hit of a search, best first, page by page. */
  async *searchAll(opts: SearchOptions): AsyncGenerator<SearchHit, void, undefined> {
    let cursor = opts.cursor;
    do {
      const page = await this.search({ ...opts, cursor });
      yield* page.hits;
      cursor = page.nextCursor;
    } while (cursor);
  }

  // Messages.

  /** One page of messages with seq after `after`, oldest first; `turnId` and `agentId` filter. */
  messages(id: string, opts: { after?: number; limit?: number; turnId?: string; agentId?: string } = {}): Promise<MessagePage> {
    return this.get(conv(id, "/messages"), { after: opts.after, limit: opts.limit, turnId: opts.turnId, agentId: opts.agentId });
  }

  /** Every message with seq after `after`, page by page. */
  async *allMessages(id: string, opts: { after?: number; limit?: number; turnId?: string; agentId?: string } = {}): AsyncGenerator<Message, void, undefined> {
    let after: number | undefined = opts.after;
    do {
      const page = await this.messages(id, { ...opts, after });
      yield* page.messages;
      after = page.nextAfter;
    } while (after !== undefined);
  }

  /** One message, whole (a message still streaming, with all its text so far). */
  message(id: string, messageId: string): Promise<Message> {
    return this.get(conv(id, "/messages/" + enc(messageId)));
  }

  /** One page of a message's direct replies, by seq. */
  replies(id: string, messageId: string, opts: { after?: number; limit?: number } = {}): Promise<MessagePage> {
    return this.get(conv(id, "/messages/" + enc(messageId) + "/replies"), { after: opts.after, limit: opts.limit });
  }

  /** A message with its ancestors and a page of its descendants (`after`: the `nextAfter` of the page before). */
  thread(id: string, messageId: string, opts: { after?: number } = {}): Promise<Thread> {
    return this.get(conv(id, "/messages/" + enc(messageId) + "/thread"), { after: opts.after });
  }

  /** Writes a message. `idempotencyKey` is sent as the `Idempotency-Key` header. */
  postMessage(id: string, body: NewMessage, opts: { idempotencyKey?: string } = {}): Promise<MessageResult> {
    return this.send("POST", conv(id, "/messages"), body, opts.idempotencyKey ? { "Idempotency-Key": opts.idempotencyKey } : undefined);
  }

  // Events.

  /** One page of the log: events with seq after `after`, oldest first. */
  events(id: string, opts: { after?: number; limit?: number } = {}): Promise<EventPage> {
    return this.get(conv(id, "/events"), { after: opts.after, limit: opts.limit });
  }

  /** Writes a trace event (an agent's thought or tool trace). */
  postTrace(
    id: string,
    body: { payload: unknown; agentId?: string; id?: string; turnId?: string; precondition?: Precondition; clientRequestId?: string },
  ): Promise<{ event: ParleyEvent }> {
    return this.send("POST", conv(id, "/events"), { type: "trace", ...body });
  }

  // Turns.

  /** Claims the next turn. */
  claim(id: string, body: { agentId?: string; expectTurn?: number; ttlMs?: number } = {}): Promise<TurnResult> {
    return this.send("POST", conv(id, "/turns/claim"), body);
  }

  /** Resets the agent's open turn (with `claim`, claims the next turn otherwise). */
  reset(id: string, body: { agentId?: string; claim?: boolean; ttlMs?: number } = {}): Promise<TurnResult> {
    return this.send("POST", conv(id, "/turns/reset"), body);
  }

  /** Gives up the agent's open turn (a `turn.aborted` tombstone). */
  abortTurn(id: string, body: { agentId?: string; reason?: string } = {}): Promise<TurnResult> {
    return this.send("POST", conv(id, "/turns/abort"), body);
  }

  /** Lets `to` write into the open turn. */
  delegate(id: string, body: { to: string; agentId?: string }): Promise<TurnResult> {
    return this.send("POST", conv(id, "/delegations"), body);
  }

  // Prompts.

  /** Queues a prompt for the conversation's runners. */
  prompt(id: string, body: NewPrompt): Promise<PromptResult> {
    return this.send("POST", conv(id, "/prompts"), body);
  }

  /** The prompt queue: the prompt being answered first, then the waiting ones. */
  async prompts(id: string): Promise<QueuedPrompt[]> {
    const r = await this.get<{ prompts: QueuedPrompt[] }>(conv(id, "/prompts"));
    return r.prompts;
  }

  /**
   * The prompt queue exact as of a seq, with each prompt's text: the queue
   * is read between two reads of the head, and read again if a prompt event
   * came between them (at most `tries` times; then the last read is
   * returned with `exact: false`). Give it to `withQueue(state, prompts,
   * asOf)`, after which the prompt events of the stream continue it.
   */
  async promptQueue(id: string, opts: { tries?: number; texts?: boolean } = {}): Promise<{ prompts: QueuedPrompt[]; asOf: number; exact: boolean }> {
    const tries = opts.tries ?? 5;
    let prompts: QueuedPrompt[] = [];
    let asOf = 0;
    let exact = false;
    for (let i = 0; i < tries && !exact; i++) {
      const before = (await this.conversation(id)).head.lastSeq;
      prompts = await this.prompts(id);
      asOf = (await this.conversation(id)).head.lastSeq;
      exact = true;
      for (let after = before; after < asOf; ) {
        const page = await this.events(id, { after, limit: 1000 });
        if (page.events.some((e) => e.seq <= asOf && e.type.startsWith("prompt."))) exact = false;
        const last = page.events[page.events.length - 1];
        if (!exact || page.nextAfter === undefined || last === undefined) break;
        after = last.seq;
      }
    }
    if (opts.texts !== false) prompts = await this.promptTexts(id, prompts);
    return { prompts, asOf, exact };
  }

  /** The prompts with their text (`content`), read from their `prompt.queued` events. */
  async promptTexts(id: string, prompts: readonly QueuedPrompt[]): Promise<QueuedPrompt[]> {
    return Promise.all(
      prompts.map(async (p) => {
        if (p.content !== undefined) return p;
        const texts = await Promise.all(
          p.parts.map(async (seq) => {
            const page = await this.events(id, { after: seq - 1, limit: 1 });
            const e = page.events[0];
            return e?.type === "prompt.queued" && e.seq === seq ? (e.data.content ?? "") : "";
          }),
        );
        return { ...p, content: texts.join("\n\n") };
      }),
    );
  }

  /**
   * Where a prompt stands: queued (and on what it waits), dispatched,
   * answering, or how it ended. With `wait` (milliseconds, at most 60000)
   * the server holds the request until the prompt ends or the wait passes.
   * An unknown prompt is 404 `not_found`.
   */
  getPrompt(id: string, promptId: string, opts: { wait?: number; signal?: AbortSignal } = {}): Promise<PromptStatus> {
    const wait = opts.wait === undefined ? undefined : Math.min(Math.max(0, Math.round(opts.wait)), MAX_PROMPT_WAIT_MS) + "ms";
    return this.request("GET", conv(id, "/prompts/" + enc(promptId)), { wait }, undefined, {}, opts.signal).then((r) => r.json() as Promise<PromptStatus>);
  }

  /**
   * Waits until a prompt ends (completed or canceled), each request held by
   * the server up to a minute, until `signal` aborts; returns its final status.
   */
  async waitPrompt(id: string, promptId: string, opts: { signal?: AbortSignal } = {}): Promise<PromptStatus> {
    for (;;) {
      const st = await this.getPrompt(id, promptId, { wait: MAX_PROMPT_WAIT_MS, ...opts });
      if (st.state === "completed" || st.state === "canceled") return st;
      opts.signal?.throwIfAborted();
    }
  }

  /**
   * Queues a prompt, waits until it ends (give `signal` to bound the wait)
   * and returns its final status with its answer: the runner's message
   * (its `status` says whether it completed, ended in an error or was
   * canceled), or none when it ended without one.
   */
  async askAndWait(id: string, body: NewPrompt, opts: { signal?: AbortSignal } = {}): Promise<{ status: PromptStatus; message?: Message }> {
    const q = await this.prompt(id, body);
    const status = await this.waitPrompt(id, q.id, opts);
    if (!status.messageId) return { status };
    return { status, message: await this.message(id, status.messageId) };
  }

  /** Withdraws a waiting prompt (409 `busy` if it is being answered: stop it instead). */
  withdrawPrompt(id: string, promptId: string, opts: { agentId?: string } = {}): Promise<TurnResult> {
    return this.send("DELETE", conv(id, "/prompts/" + enc(promptId)), opts.agentId ? { agentId: opts.agentId } : undefined);
  }

  /** Moves a waiting prompt to the front of the queue. */
  promotePrompt(id: string, promptId: string, opts: { agentId?: string } = {}): Promise<TurnResult> {
    return this.send("POST", conv(id, "/prompts/" + enc(promptId) + "/promote"), opts.agentId ? { agentId: opts.agentId } : undefined);
  }

  /**
   * Stops an answer: its runner is told to stop. With `promptId` (the
   * prompt you started), only that prompt's answer, while it is being
   * answered: otherwise 409 `not_answering`, whose `details.answering`
   * names the prompt and message being answered now (or is null), and
   * nothing is stopped. Without it, whatever answer is under way (404 if
   * none). Resolves with what it stopped.
   */
  stop(id: string, opts: { promptId?: string } = {}): Promise<Stopped> {
    return this.send("POST", conv(id, "/abort"), opts.promptId ? { promptId: opts.promptId } : undefined);
  }

  /** Removes a message and every message after it. */
  revert(id: string, body: { messageId: string; agentId?: string }): Promise<{ removed: string[]; seq: number }> {
    return this.send("POST", conv(id, "/revert"), body);
  }

  // Input requests.

  /**
   * The input requests of a conversation that agents made of people
   * (approvals of tool calls, questions), oldest first: those still
   * pending (the default), or with `open` also those that ended but whose
   * outcome the asking runner has not taken yet. Requests that ended long
   * ago are in their messages.
   */
  async inputs(id: string, status: "pending" | "open" = "pending"): Promise<Input[]> {
    const r = await this.get<{ inputs: Input[] }>(conv(id, "/inputs"), { status });
    return r.inputs;
  }

  /**
   * Answers an input request: an approval with `{approved, reason?}`, a
   * question with JSON fitting its schema, `{choices: [label…]}` or
   * `{text}`. The same answer again resolves with the first result; another
   * answer after it, or one to a request that expired or was canceled, is
   * 409 `input_ended`; one that does not fit is 422 `invalid_value`.
   * `agentId` names who answers for an admin token (or an open server).
   */
  answerInput(id: string, requestId: string, answer: unknown, opts: { agentId?: string } = {}): Promise<{ input: Input; seq: number }> {
    return this.send("POST", conv(id, "/inputs/" + enc(requestId)), opts.agentId ? { answer, agentId: opts.agentId } : { answer });
  }

  // Export and import.

  /** A conversation's export file (Markdown for people, JSON or JSON Lines for machines). */
  async exportConversation(id: string, format: ExportFormat = "json"): Promise<Blob> {
    const res = await this.request("GET", conv(id, "/export"), { format });
    return res.blob();
  }

  /** A conversation's export file as text. */
  async exportText(id: string, format: ExportFormat = "markdown"): Promise<string> {
    const res = await this.request("GET", conv(id, "/export"), { format });
    return res.text();
  }

  /** Imports an export (JSON or JSON Lines) or legacy rows (admin). */
  async importConversation(
    body: string | Blob | ArrayBuffer | Uint8Array,
    opts: { id?: string; title?: string; participants?: string[] } = {},
  ): Promise<ImportResult> {
    const q: Query = { id: opts.id, title: opts.title, participants: opts.participants?.join(",") };
    const res = await this.request("POST", "/v1/conversations/import", q, body as RequestInit["body"], { "Content-Type": "application/json" });
    return (await res.json()) as ImportResult;
  }

  /**
   * A copy of the server's whole store (admin), streamed: pipe its `body`
   * to a file, and keep the file only if the stream ends without an error.
   * A server on PostgreSQL rejects with `not_found`, one already sending a
   * backup with `busy`.
   */
  async backup(opts: { signal?: AbortSignal } = {}): Promise<Backup> {
    return backupOf(await this.request("GET", "/v1/admin/backup", {}, undefined, {}, opts.signal));
  }

  // Scheduled tasks.

  /** Schedules a prompt. */
  createTask(body: NewTask): Promise<Task> {
    return this.send("POST", "/v1/tasks", body);
  }

  /** The scheduled tasks. */
  async tasks(): Promise<Task[]> {
    return (await this.get<{ tasks: Task[] }>("/v1/tasks")).tasks;
  }

  /** Unschedules a task. */
  async deleteTask(taskId: string): Promise<void> {
    await this.send("DELETE", "/v1/tasks/" + enc(taskId));
  }

  // Identity.

  /** Who this client's token acts as, and whether the server runs open. */
  whoami(): Promise<WhoAmI> {
    return this.get<WhoAmI>("/v1/whoami");
  }

  // Tokens (admin).

  /** Creates a token; its secret is in `token`, this once. */
  createToken(body: { kind: "agent" | "viewer" | "admin"; agentId?: string; name?: string }): Promise<Token> {
    return this.send("POST", "/v1/tokens", body);
  }

  /** The tokens, oldest first, without secrets. */
  async tokens(): Promise<Token[]> {
    return (await this.get<{ tokens: Token[] }>("/v1/tokens")).tokens;
  }

  /** Revokes a token: it stops working at once, and its streams end. */
  async revokeToken(tokenId: string): Promise<void> {
    await this.send("DELETE", "/v1/tokens/" + enc(tokenId));
  }

  // Operations.

  /** Whether the server answers `/readyz` with 200. */
  async ready(): Promise<boolean> {
    try {
      await this.request("GET", "/readyz");
      return true;
    } catch (err) {
      if (err instanceof ParleyError) return false;
      throw err;
    }
  }

  // Streams.

  /**
   * Follows a conversation live (SSE by default; WebSocket with
   * `transport: "ws"`). See {@link Subscription}.
   */
  subscribe(id: string, opts: SubscribeOptions = {}): Subscription {
    return new Subscription(this, id, opts);
  }

  // Plumbing.

  /** The absolute URL of a path of the server (with a query). */
  url(path: string, query: Query = {}): string {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== "") q.set(k, String(v));
    const s = q.toString();
    return this.baseUrl + path + (s ? "?" + s : "");
  }

  /** The headers of every request: the token, if any. */
  headers(): Record<string, string> {
    return this.token ? { Authorization: "Bearer " + this.token } : {};
  }

  private async get<T>(path: string, query: Query = {}): Promise<T> {
    const res = await this.request("GET", path, query);
    return (await res.json()) as T;
  }

  private async send<T>(method: string, path: string, body?: unknown, headers?: Record<string, string>): Promise<T> {
    const res = await this.request(method, path, {}, body === undefined ? undefined : JSON.stringify(body), {
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
      ...headers,
    });
    const text = await res.text();
    return (text ? JSON.parse(text) : undefined) as T;
  }

  /** Sends one request; an answer that is not 2xx rejects with its {@link ParleyError}. */
  async request(
    method: string,
    path: string,
    query: Query = {},
    body?: RequestInit["body"],
    headers: Record<string, string> = {},
    signal?: AbortSignal,
  ): Promise<Response> {
    const res = await this.fetchImpl(this.url(path, query), {
      method,
      headers: { Accept: "application/json", ...this.headers(), ...headers },
      ...(body === undefined ? {} : { body }),
      ...(signal === undefined ? {} : { signal }),
      cache: "no-store",
    });
    if (!res.ok) throw await responseError(res);
    return res;
  }
}

/** The longest a `getPrompt` wait may be, as the server bounds it. */
export const MAX_PROMPT_WAIT_MS = 60_000;

function enc(s: string): string {
  return encodeURIComponent(s);
}

function conv(id: string, rest = ""): string {
  return "/v1/conversations/" + enc(id) + rest;
}
