// The answer to one prompt, as a runner's handler writes it (runner.ts).

import { ParleyError } from "./errors.js";
import { answerOf, approvalOf, type InputOutcome, type InputRequest } from "./asking.js";
import type { Frame, Runner, RunnerPush } from "./runner.js";
import type { Approval, Channel, Finality, FinishReason, ToolStatus } from "./types.js";

/** One change of a tool call. */
export interface ToolUpdate {
  callId: string;
  toolName: string;
  status: ToolStatus;
  args?: unknown;
  result?: unknown;
  error?: string;
}

/** What a message may say when it is created, besides its id. */
export interface CreateOptions {
  /** The message it answers (default: the prompt). */
  replyTo?: string;
  /** The failed message it retries (default: the one a failover ended). */
  retryOf?: string;
  /**
   * Where it goes outside Parley: only the channel of the prompt it
   * answers (the default); the server refuses any other (forbidden).
   */
  channel?: Channel;
  /** The OpenCode session that wrote it, kept in its metadata. */
  opencodeSessionId?: string;
}

/** What a finalize may say. */
export interface FinalizeOptions {
  reason?: FinishReason;
  /** The whole answer: it must start with the text streamed, and the rest is added as text (any other text is refused, `invalid_value`). */
  finalText?: string;
  /** What it closes: the runner's turn by default; `none` lets another message follow in the turn. */
  finality?: Finality;
}

/**
 * Writes the answer to one prompt: `text`, `tool` and `finalize` write to
 * the answer's message, which the first of them creates (replying to the
 * prompt, to its channel) unless `create` made it already. Each resolves
 * once the server made it durable, across reconnects; once the answer is
 * aborted, each rejects at once and sends nothing.
 */
export class Reply {
  private msg: string | undefined;
  private textBytes = 0;
  private retry: string | undefined;
  private queue: Promise<unknown> = Promise.resolve();
  /** @internal */
  closed = false;
  /** @internal Set once a write into the open message was refused with turn_conflict: its turn was aborted under it. */
  cut = false;

  /** @internal */
  constructor(
    private readonly runner: Runner,
    private readonly conv: string,
    /** The prompt being answered. */
    readonly prompt: RunnerPush,
    private readonly signal: AbortSignal,
  ) {}

  /** The id of the answer's message open now, if any. */
  get messageId(): string | undefined {
    return this.msg;
  }

  /** Starts a message of the answer as `o` says (a message still open is finalized first, closing nothing). */
  create(o: CreateOptions = {}): Promise<void> {
    return this.serial(async () => {
      if (this.msg) await this.end({ type: "message.finalize", reason: "end_turn", finality: "none" });
      await this.open(o);
    });
  }

  /** Appends a text delta to the answer. */
  text(delta: string): Promise<void> {
    return this.serial(async () => {
      await this.open();
      const want = this.textBytes + delta.length;
      await this.runner.deliver(this.conv, { type: "message.part.text-delta", turnId: this.msg, delta }, this.msg!, (m) => !!m && m.content.length >= want);
      this.textBytes = want;
    });
  }

  /** Adds or updates a tool call of the answer. */
  tool(u: ToolUpdate): Promise<void> {
    return this.serial(async () => {
      await this.open();
      await this.runner.deliver(this.conv, { type: "message.part.tool-update", turnId: this.msg, ...u }, this.msg!, (m) =>
        (m?.parts ?? []).some((p) => p.type === "tool-call" && p.callId === u.callId && p.status === u.status),
      );
    });
  }

  /** Ends the answer's message as `o` says (`serve` finalizes it when the handler returns). */
  finalize(o: FinalizeOptions = {}): Promise<void> {
    return this.serial(async () => {
      await this.open();
      await this.end({ type: "message.finalize", reason: o.reason ?? "end_turn", ...o });
    });
  }

  /** Ends the answer's message with an error, keeping the turn: the next message retries it. */
  failover(reason: string): Promise<void> {
    return this.serial(async () => {
      await this.open();
      const failed = this.msg;
      await this.end({ type: "error", turnId: failed, error: reason, finality: "none" });
      this.retry = failed;
    });
  }

  /**
   * Asks a person to approve something (a tool call: give its `toolCallId`,
   * `toolName` and `args`), in the answer's message, and waits for the
   * answer: the message stays streaming, its turn held, until someone
   * answers. A request that expires, or is canceled (the answer stopped,
   * steered, reverted), is a denial whose `reason` says so (`expired`,
   * `stopped`, …). Rejects when `signal` (or the answer's own) aborts.
   */
  async askApproval(req: InputRequest, opts: { signal?: AbortSignal } = {}): Promise<Approval> {
    return approvalOf(await this.ask({ ...req, kind: "approval" }, opts.signal));
  }

  /**
   * Asks a person a question (with `options` to choose from, a JSON
   * `schema` the answer fits, or neither: free text) in the answer's
   * message, and resolves with the answer: `{choices: [label…]}` or
   * `{text}` for options, JSON valid against the schema, or `{text}`.
   * Rejects with an `InputNotAnsweredError` when it expires or is
   * canceled, and when `signal` (or the answer's own) aborts.
   */
  async askQuestion(req: InputRequest, opts: { signal?: AbortSignal } = {}): Promise<unknown> {
    return answerOf(await this.ask({ ...req, kind: "question" }, opts.signal));
  }

  /**
   * Takes back a request still pending that was answered some other way:
   * the server ends it `canceled` with `reason` (`withdrawn` if none), and
   * the ask waiting for it settles with that outcome. A request that has
   * ended is left as it is.
   */
  async withdrawInput(requestId: string, reason?: string): Promise<void> {
    const frame: Frame = { type: "input.withdraw", requestId };
    if (reason) frame["reason"] = reason;
    await this.runner.deliver(this.conv, frame, "");
  }

  /** Sends an input request in the answer's message and waits for its outcome. */
  private async ask(req: InputRequest, signal: AbortSignal | undefined): Promise<InputOutcome> {
    const id = req.requestId || "req_" + crypto.randomUUID();
    const { expiresAt, ...rest } = req;
    const signals = signal ? AbortSignal.any([this.signal, signal]) : this.signal;
    let frame: Frame | undefined;
    await this.serial(async () => {
      await this.open();
      frame = { type: "message.part.input-request", turnId: this.msg, ...rest, requestId: id };
      if (expiresAt !== undefined) frame["expiresAt"] = expiresAt instanceof Date ? expiresAt.toISOString() : expiresAt;
    });
    return this.runner.ask(this.conv, frame!, frame!["turnId"] as string, signals);
  }

  /** @internal Ends the answer with an error part, in a message of its own if none is open. */
  async fail(text: string): Promise<void> {
    await this.queue.catch(() => {});
    if (!this.msg) await this.open();
    await this.end({ type: "error", turnId: this.msg, error: text });
  }

  /** @internal Sends a frame that ends the open message. */
  async end(frame: Frame): Promise<void> {
    await this.runner.deliver(this.conv, { ...frame, turnId: this.msg }, this.msg!, (m) => !!m && m.status !== "streaming");
    this.msg = undefined;
    this.textBytes = 0;
  }

  private async open(o: CreateOptions = {}): Promise<void> {
    if (this.msg) return;
    const id = crypto.randomUUID();
    const replyTo = o.replyTo ?? this.prompt.messageId;
    const channel = o.channel ?? this.prompt.channel ?? undefined;
    const retryOf = o.retryOf ?? this.retry;
    const frame: Frame = { type: "message.create", turnId: id, replyTo };
    if (retryOf) frame["retryOf"] = retryOf;
    if (channel) Object.assign(frame, { channelType: channel.type, channelId: channel.id });
    if (o.opencodeSessionId) frame["opencodeSessionId"] = o.opencodeSessionId;
    await this.runner.deliver(this.conv, frame, id, (m) => !!m);
    this.msg = id;
    this.textBytes = 0;
    this.retry = undefined;
  }

  /** Runs calls one after another, unless the answer was aborted or has ended. */
  private serial(fn: () => Promise<void>): Promise<void> {
    const run = async (): Promise<void> => {
      if (this.signal.aborted) throw this.signal.reason instanceof Error ? this.signal.reason : new Error("the answer was aborted");
      if (this.closed) throw new Error(`the answer to prompt ${this.prompt.messageId} has ended: its handler returned`);
      try {
        await fn();
      } catch (err) {
        if (this.msg && err instanceof ParleyError && err.code === "turn_conflict") this.cut = true;
        throw err;
      }
    };
    const p = this.queue.then(run, run);
    this.queue = p.catch(() => {});
    return p;
  }
}
