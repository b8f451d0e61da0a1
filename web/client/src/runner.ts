// Runners: answering prompts over the runner WebSocket (docs/api.md,
// "Runners"), on a conversation's own endpoint or on an agent's, which
// serves every conversation the agent takes part in.

import { ParleyError, errorFromBody, isFatal, isRecord } from "./errors.js";
import { WSNotOpened } from "./transport.js";
import { backoffDelay, sleep, wsURL } from "./stream.js";
import type { ParleyClient } from "./client.js";
import type { WebSocketLike } from "./options.js";
import { InputDesk, aborted, type InputOutcome } from "./asking.js";
import { Reply } from "./reply.js";
import type { Channel, InputStatus, Message } from "./types.js";

/**
 * A frame the server sends a runner (`error`: on an agent-wide runner, its
 * work in `conversationId` ended; `input.answered`: an input request the
 * runner made ended, and `input.pending`: one is still pending, both
 * handled by `Reply.askApproval` and `Reply.askQuestion`).
 */
export interface RunnerPush {
  type: "prompt" | "abort" | "revert" | "error" | "input.answered" | "input.pending";
  /** The prompt's id (its user message's), or the message concerned. */
  messageId: string;
  content?: string;
  messageFormat?: "v1" | "v2";
  /** Who asked. */
  agentId?: string;
  channel?: Channel | null;
  /** The conversation: always on an agent-wide runner, never on a conversation's own. */
  conversationId?: string;
  error?: { code: string; message: string };
  /** On `input.answered` and `input.pending`: the request, and the message that asked (`turnId`). */
  requestId?: string;
  turnId?: string;
  status?: InputStatus | (string & {});
  answer?: unknown;
  answeredBy?: string;
  reason?: string;
}


/**
 * Answers one prompt: `reply.prompt` is the prompt; write the answer with
 * `reply`'s methods and return (or throw) when done. `signal` aborts when
 * the answer is aborted (a steer, a stop, a revert, an abort of the turn
 * it is written in, the conversation deleted) or the runner stops: stop
 * then. A write refused with `turn_conflict` (its turn was aborted before
 * the abort came) ends the answer the same way, whatever the handler
 * throws: its message ends canceled, with no error part.
 */
export type RunnerHandler = (reply: Reply, signal: AbortSignal) => Promise<void>;

/** How a runner reconnects. */
export interface RunnerOptions {
  /** The first wait before reconnecting, in ms (100). */
  minBackoffMs?: number;
  /** The longest wait, in ms (5000). */
  maxBackoffMs?: number;
}

/** @internal A frame of the runner protocol. */
export type Frame = Record<string, unknown>;

/** The connection was lost before a frame's reply came. */
class LostError extends Error {
  override readonly name = "LostError";
}

/** One WebSocket of a runner: replies are matched to frames in order. */
class RunnerConn {
  private readonly waiting: { resolve: (f: Frame) => void; reject: (e: Error) => void }[] = [];
  fatal: ParleyError | undefined;
  readonly closed: Promise<void>;
  private ended = false;

  private constructor(
    private readonly ws: WebSocket,
    wide: boolean,
    onPush: (p: RunnerPush) => void,
  ) {
    let done!: () => void;
    this.closed = new Promise((r) => (done = r));
    ws.onmessage = (ev: MessageEvent) => {
      if (typeof ev.data !== "string") return;
      let f: unknown;
      try {
        f = JSON.parse(ev.data);
      } catch {
        return;
      }
      if (!isRecord(f)) return;
      const reply = f["type"] === "ack" || (f["type"] === "error" && "turnId" in f);
      if (reply) this.waiting.shift()?.resolve(f);
      else if (f["type"] === "error" && (!wide || !f["conversationId"])) this.fatal = errorFromBody(0, ev.data);
      else onPush(f as unknown as RunnerPush);
    };
    ws.onclose = (ev: CloseEvent) => {
      this.ended = true;
      if (!this.fatal && ev.code === 4404) this.fatal = new ParleyError(0, "not_found", ev.reason || "the conversation was deleted");
      if (!this.fatal && ev.code === 4401) this.fatal = new ParleyError(0, "unauthorized", ev.reason || "the token of this connection was revoked");
      for (const w of this.waiting.splice(0)) w.reject(this.fatal ?? new LostError(`the runner connection closed (code ${ev.code})`));
      done();
    };
  }

  static open(WS: WebSocketLike, url: string, wide: boolean, onPush: (p: RunnerPush) => void): Promise<RunnerConn> {
    return new Promise((resolve, reject) => {
      const ws = new WS(url);
      const conn = new RunnerConn(ws, wide, onPush); // listening before it opens: a prompt may come at once
      const close = ws.onclose;
      ws.onopen = () => {
        ws.onclose = close;
        resolve(conn);
      };
      ws.onclose = (ev: CloseEvent) => {
        reject(new WSNotOpened(`the runner WebSocket closed before it opened (code ${ev.code})`));
      };
      ws.onerror = () => {
        // a close follows
      };
    });
  }

  /** Sends one frame; resolves with its ack, rejects with the server's error (status 0) or a lost connection. */
  send(frame: Frame): Promise<Frame> {
    if (this.ended) return Promise.reject(this.fatal ?? new LostError("the runner connection closed"));
    const reply = new Promise<Frame>((resolve, reject) => this.waiting.push({ resolve, reject }));
    this.ws.send(JSON.stringify(frame));
    return reply.then((f) => {
      if (f["type"] === "error") throw errorFromBody(0, JSON.stringify(f));
      return f;
    });
  }

  close(): void {
    this.ws.close();
  }
}

/** A prompt being answered. */
interface Job {
  push: RunnerPush;
  reply: Reply;
  ctl: AbortController;
  aborted: boolean;
  done: Promise<void>;
}

/** One conversation's work: the prompt being answered and those given meanwhile. */
interface Lane {
  job?: Job;
  waiting: RunnerPush[];
}

/**
 * A runner of a conversation (`GET /v1/conversations/{id}/runner`):
 * `serve` answers its prompts. `agentId` names the agent for an admin
 * token (or an open server). It needs a WebSocket (ClientOptions.WebSocket
 * in Node 20). (A function rather than a method of the client, so that a
 * page that runs no runner bundles none of this.)
 */
export function conversationRunner(client: ParleyClient, conversationId: string, opts: RunnerOptions & { agentId?: string } = {}): Runner {
  const { agentId, ...rest } = opts;
  return new Runner(client, "/v1/conversations/" + encodeURIComponent(conversationId) + "/runner", { agentId }, false, rest);
}

/**
 * The runner of an agent for every conversation it takes part in (`GET
 * /v1/agents/{agentId}/runner`): `serve` answers the prompts of all of
 * them over one connection, one at a time in each conversation and the
 * conversations side by side. The token must be the agent's or an admin's.
 */
export function agentRunner(client: ParleyClient, agentId: string, opts: RunnerOptions = {}): Runner {
  return new Runner(client, "/v1/agents/" + encodeURIComponent(agentId) + "/runner", {}, true, opts);
}

/** How many answered prompts a runner remembers, to end again one given back after a reconnect. */
const MAX_ENDED = 1024;

/**
 * A runner: `serve` answers the prompts the server dispatches to it with a
 * handler, one at a time in each conversation (an agent-wide runner's
 * conversations side by side), reconnecting by itself. Make one with
 * `conversationRunner` (a conversation's own) or `agentRunner` (every
 * conversation of an agent).
 */
export class Runner {
  private conn: RunnerConn | undefined;
  private dialing: Promise<RunnerConn> | undefined;
  private readonly lanes = new Map<string, Lane>();
  private readonly ended = new Map<string, string>();
  /** The input requests asked, and their outcomes. */
  private readonly inputs = new InputDesk(MAX_ENDED);
  private readonly stopper = new AbortController();
  private handler: RunnerHandler | undefined;
  private failure: ((err: unknown) => void) | undefined;

  /** @internal */
  constructor(
    private readonly client: ParleyClient,
    private readonly path: string,
    private readonly query: Record<string, string | undefined>,
    /** Whether it serves every conversation of an agent: each frame names its conversation. */
    readonly wide: boolean,
    private readonly opts: RunnerOptions = {},
  ) {
    if (!client.WebSocketImpl) throw new TypeError("no WebSocket: pass one in ClientOptions.WebSocket (Node 20 has none)");
  }

  /**
   * Answers prompts with `handler` until `close` is called or `signal`
   * aborts (it then resolves, leaving what was under way to the agent's
   * next runner), or the server ends the runner for good (it rejects with
   * the {@link ParleyError}: a refused handshake, the conversation deleted,
   * the token revoked). When the handler returns, the message it wrote is
   * finalized and the prompt completed; when it throws, the answer ends
   * with an error part showing the error's message; when the answer is
   * aborted, its signal aborts and, once it returns, the prompt ends
   * canceled. After a lost connection it reconnects with backoff, and each
   * frame whose reply was lost is checked (`message.state`) and sent again
   * only if it was not applied, so an answer goes on in the same message.
   */
  serve(handler: RunnerHandler, { signal }: { signal?: AbortSignal } = {}): Promise<void> {
    this.handler = handler;
    const stop = (): void => this.close();
    signal?.addEventListener("abort", stop, { once: true });
    if (signal?.aborted) this.close();
    return new Promise<void>((resolve, reject) => {
      this.failure = reject;
      this.stopper.signal.addEventListener("abort", () => resolve(), { once: true });
      this.connection().catch((err: unknown) => this.fail(err));
    }).finally(async () => {
      signal?.removeEventListener("abort", stop);
      this.close();
      await Promise.all([...this.lanes.values()].flatMap((l) => (l.job ? [l.job.done] : [])));
    });
  }

  /** Stops serving: the answers under way are aborted, and the connection closed. */
  close(): void {
    if (!this.stopper.signal.aborted) this.stopper.abort();
    for (const l of this.lanes.values()) l.job?.ctl.abort();
    this.conn?.close();
  }

  private fail(err: unknown): void {
    if (this.stopper.signal.aborted) return;
    this.failure?.(err);
    this.close();
  }

  /** The current connection, made (with backoff) when there is none or `lost` is the current one. */
  private connection(lost?: RunnerConn): Promise<RunnerConn> {
    if (this.conn && this.conn !== lost) return Promise.resolve(this.conn);
    this.dialing ??= this.dial().finally(() => (this.dialing = undefined));
    return this.dialing;
  }

  private async dial(): Promise<RunnerConn> {
    const url = wsURL(this.client.url(this.path, { ...this.query, token: this.client.token }));
    for (let attempt = 0; ; attempt++) {
      if (this.stopper.signal.aborted) throw new ParleyError(0, "unavailable", "the runner was closed");
      try {
        const conn = await RunnerConn.open(this.client.WebSocketImpl!, url, this.wide, (p) => this.take(p));
        this.conn = conn;
        void conn.closed.then(() => this.closed(conn));
        return conn;
      } catch (err) {
        const why = err instanceof WSNotOpened ? await this.probe() : err;
        if (isFatal(why)) {
          this.fail(why);
          throw why;
        }
      }
      await sleep(backoffDelay(attempt, this.opts.minBackoffMs ?? 100, this.opts.maxBackoffMs ?? 5000), this.stopper.signal);
    }
  }

  /**
   * A WebSocket that did not open says nothing of why: ask over HTTP
   * whether the token may run here, as the server decides it. A refusal
   * is for good (serve rejects with it at once); anything else is taken
   * for a connection lost, and tried again.
   */
  private async probe(): Promise<unknown> {
    try {
      const me = await this.client.whoami();
      const id = decodeURIComponent(this.path.split("/")[3]!);
      if (this.wide) {
        if (me.kind === "viewer" || (me.kind === "agent" && me.agentId !== id)) {
          return new ParleyError(403, "forbidden", `this token (${me.kind} ${me.agentId}) cannot run agent ${id}`);
        }
        return undefined;
      }
      // A conversation's runner runs as the token's agent, or as the one
      // agentId names for an admin token (or an open server).
      const named = this.query["agentId"];
      if (me.kind === "viewer") return new ParleyError(403, "forbidden", "a viewer token cannot run an agent");
      if (me.kind === "agent" && named && named !== me.agentId) {
        return new ParleyError(403, "forbidden", `this token belongs to agent ${me.agentId}; it cannot run as ${named}`);
      }
      if (me.kind !== "agent" && !named) {
        return new ParleyError(422, "invalid_value", "agentId is required: an admin token (or an open server) runs as the agent it names");
      }
      const v = await this.client.conversation(id);
      const c = v.conversation;
      if (me.kind === "agent" && ![...c.participants, ...(c.members ?? []), c.createdBy ?? ""].includes(me.agentId ?? "")) {
        return new ParleyError(403, "forbidden", `agent ${me.agentId} does not take part in conversation ${id}`);
      }
    } catch (err) {
      return err;
    }
    return undefined;
  }

  /** A connection ended: for good (its error frame says why), or to be made again. */
  private closed(conn: RunnerConn): void {
    if (this.stopper.signal.aborted || this.conn !== conn) return;
    if (conn.fatal && isFatal(conn.fatal)) return this.fail(conn.fatal);
    this.connection(conn).catch((err: unknown) => this.fail(err));
  }

  /** Sends a frame in a conversation and returns its reply once applied, exactly once across reconnects. */
  async deliver(conv: string, frame: Frame, msg: string, applied?: (m: Message | undefined) => boolean): Promise<Frame> {
    if (this.wide) frame = { ...frame, conversationId: conv };
    let conn = await this.connection();
    for (;;) {
      try {
        return await conn.send(frame);
      } catch (err) {
        if (!(err instanceof LostError) || this.stopper.signal.aborted) throw err;
      }
      for (;;) {
        conn = await this.connection(conn);
        if (!msg || !applied) break;
        let m: Message | undefined;
        try {
          const ack = await conn.send(this.wide ? { type: "message.state", turnId: msg, conversationId: conv } : { type: "message.state", turnId: msg });
          m = ack["message"] as Message;
        } catch (err) {
          if (err instanceof LostError) continue;
          if (!(err instanceof ParleyError && err.code === "not_found")) throw err;
        }
        if (applied(m)) return { type: "ack", message: m };
        break;
      }
    }
  }

  private lane(conv: string): Lane {
    let l = this.lanes.get(conv);
    if (!l) this.lanes.set(conv, (l = { waiting: [] }));
    return l;
  }

  private idle(conv: string, l: Lane): void {
    if (!l.job && l.waiting.length === 0) this.lanes.delete(conv);
  }

  /**
   * @internal Sends an input request and waits for it to end: resolves
   * with the outcome once taken (and acknowledged to the server), rejects
   * with the signal's reason when it aborts.
   */
  async ask(conv: string, frame: Frame, msg: string, signal: AbortSignal): Promise<InputOutcome> {
    const id = frame["requestId"] as string;
    const key = conv + "\n" + id;
    const { got, early, known } = this.inputs.wait(key);
    const abort = aborted(signal);
    try {
      if (!early && !known) {
        const applied = (m: Message | undefined): boolean => (m?.parts ?? []).some((x) => x.type === "input-request" && x.requestId === id);
        await Promise.race([this.deliver(conv, frame, msg, applied).catch((err: unknown) => this.askedBefore(conv, id, err)), abort]);
      }
      const o = early ?? (await Promise.race([got, abort]));
      await this.ackInput(conv, id);
      return o;
    } finally {
      this.inputs.done(key);
    }
  }

  /**
   * A request refused as `busy` may be one asked before (by this agent's
   * runner before it restarted, its input.pending not come yet): if the
   * server holds it, its outcome is waited for; otherwise err stands.
   */
  private async askedBefore(conv: string, id: string, err: unknown): Promise<void> {
    if (!(err instanceof ParleyError && err.code === "busy")) throw err;
    const c = this.wide ? conv : decodeURIComponent(this.path.split("/")[3]!);
    const open = await this.client.inputs(c, "open");
    if (!open.some((x) => x.requestId === id)) throw err;
  }

  private async ackInput(conv: string, id: string): Promise<void> {
    this.inputs.took(conv + "\n" + id);
    try {
      await this.deliver(conv, { type: "input.ack", requestId: id }, "");
    } catch (err) {
      if (!(err instanceof ParleyError && err.status === 0)) throw err;
    }
  }

  /** An input request ended: its asker takes the outcome, or it is kept for an ask to come. */
  private answered(conv: string, p: RunnerPush): void {
    const id = p.requestId ?? "";
    const o: InputOutcome = { requestId: id, status: p.status ?? "canceled" };
    if (p.answer !== undefined) o.answer = p.answer;
    if (p.answeredBy) o.answeredBy = p.answeredBy;
    if (p.reason) o.reason = p.reason;
    if (this.inputs.tell(conv + "\n" + id, o) === "again") {
      void this.ackInput(conv, id).catch((err: unknown) => this.fail(err)); // told again before the ack landed
    }
  }

  /** Acts on a frame the server sent. */
  private take(p: RunnerPush): void {
    if (this.stopper.signal.aborted) return;
    const conv = this.wide ? (p.conversationId ?? "") : ""; // a conversation's own runner has one: ""
    if (p.type === "input.answered") return this.answered(conv, p);
    if (p.type === "input.pending") {
      // A request of this agent still pending (told after a reconnect, or
      // to a runner that restarted): a handler that asks it again, by its
      // id, waits for it rather than asking twice.
      this.inputs.heldPending(conv + "\n" + (p.requestId ?? ""));
      return;
    }
    const l = this.lane(conv);
    const key = conv + "\n" + p.messageId;
    switch (p.type) {
      case "prompt": {
        const outcome = this.ended.get(key);
        if (l.job?.push.messageId === p.messageId) break; // given again after a reconnect: under way
        if (outcome) void this.end(conv, p.messageId, outcome, "").catch((err: unknown) => this.fail(err));
        else if (l.job) {
          if (!l.waiting.some((w) => w.messageId === p.messageId)) l.waiting.push(p);
        } else this.start(conv, l, p);
        break;
      }
      case "abort":
        if (l.job && (!p.messageId || l.job.push.messageId === p.messageId)) {
          l.job.aborted = true;
          l.job.ctl.abort();
        } else {
          const i = l.waiting.findIndex((w) => w.messageId === p.messageId);
          if (i >= 0) {
            l.waiting.splice(i, 1);
            void this.end(conv, p.messageId, "aborted", "").catch((err: unknown) => this.fail(err));
          }
        }
        break;
      case "error":
        l.waiting = [];
        if (l.job) {
          l.job.aborted = true;
          l.job.ctl.abort();
        }
        break;
    }
    this.idle(conv, l);
  }

  private start(conv: string, l: Lane, p: RunnerPush): void {
    const ctl = new AbortController();
    const reply = new Reply(this, conv, p, ctl.signal);
    const job: Job = { push: p, reply, ctl, aborted: false, done: Promise.resolve() };
    l.job = job;
    job.done = (async () => {
      let err: unknown;
      try {
        await this.handler!(reply, ctl.signal);
      } catch (e) {
        err = e;
      }
      await this.finish(conv, l, job, err).catch((e: unknown) => this.fail(e));
    })();
  }

  /** Ends the answer whose handler returned, and starts the next prompt of its conversation. */
  private async finish(conv: string, l: Lane, job: Job, err: unknown): Promise<void> {
    job.reply.closed = true;
    if (this.stopper.signal.aborted) return;
    let outcome = "complete";
    try {
      // Stopped, or its turn aborted under it (a write refused with
      // turn_conflict): aborted ends the message canceled, with no error part.
      if (job.aborted || job.reply.cut) outcome = "aborted";
      else if (err !== undefined) await job.reply.fail(err instanceof Error ? err.message : JSON.stringify(err));
      else if (job.reply.messageId) await job.reply.end({ type: "message.finalize", reason: "end_turn" });
      await this.end(conv, job.push.messageId, outcome, job.reply.messageId ?? "");
    } catch (e) {
      if (!(e instanceof ParleyError && e.status === 0)) throw e; // refused: it ends as well as the server lets it
    } finally {
      l.job = undefined;
      const next = l.waiting.shift();
      if (next && !this.stopper.signal.aborted) this.start(conv, l, next);
      this.idle(conv, l);
    }
  }

  /** Sends complete or aborted for a prompt, and remembers that it did. */
  private async end(conv: string, id: string, outcome: string, msg: string): Promise<void> {
    const key = conv + "\n" + id;
    if (!this.ended.has(key)) {
      this.ended.set(key, outcome);
      if (this.ended.size > MAX_ENDED) this.ended.delete(this.ended.keys().next().value!);
    }
    try {
      await this.deliver(conv, { type: outcome, messageId: id, ...(msg ? { turnId: msg } : {}) }, "");
    } catch (err) {
      if (!(err instanceof ParleyError && err.status === 0)) throw err;
    }
  }
}
