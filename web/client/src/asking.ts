// Input requests on the runner's side: what an agent asks a person
// (Reply.askApproval, Reply.askQuestion), how it ended, and the desk that
// matches the outcomes the server sends to the asks waiting for them.

import { isRecord } from "./errors.js";
import type { Approval, InputKind, InputOption, InputStatus } from "./types.js";

/** What an agent asks a person (`Reply.askApproval`, `Reply.askQuestion`). */
export interface InputRequest {
  /**
   * Unique in the conversation, for ever (default: a new random one). A
   * handler that gives its own can ask again after its runner restarted:
   * a request the server still holds pending is then waited for, and one
   * that ended meanwhile resolves with its outcome.
   */
  requestId?: string;
  /** Set by askApproval and askQuestion. */
  kind?: InputKind;
  /** The tool call an approval is about, its tool and arguments (shown to the person). */
  toolCallId?: string;
  toolName?: string;
  args?: unknown;
  /** What is asked (1 to 1024 bytes). */
  title: string;
  /** Longer text, in Markdown. */
  detail?: string;
  /** A JSON Schema the answer to a question must fit. */
  schema?: unknown;
  /** Choices of a question: the answer is `{choices: [label…]}` (or `{text}`). */
  options?: InputOption[];
  multiple?: boolean;
  /** When it expires unanswered (an expired approval is a denial). */
  expiresAt?: Date | string;
  /** Members who may answer besides the asker of the prompt, the conversation's owner and admins. */
  answerers?: string[];
}

/** How an input request ended, as the server tells the runner. */
export interface InputOutcome {
  requestId: string;
  status: InputStatus | (string & {});
  answer?: unknown;
  answeredBy?: string;
  reason?: string;
}

/** A question that ended unanswered: it expired, or was canceled (`reason` says why: `stopped`, `steered`, …). */
export class InputNotAnsweredError extends Error {
  override readonly name = "InputNotAnsweredError";
  constructor(
    readonly requestId: string,
    readonly status: string,
    readonly reason: string | undefined,
  ) {
    super(`input request ${requestId} ${status}${reason ? ` (${reason})` : ""}`);
  }
}

/** What an approval's outcome means: the answer, or a denial whose reason says why it ended unanswered. */
export function approvalOf(o: InputOutcome): Approval {
  if (o.status === "answered" && isRecord(o.answer)) {
    const a: Approval = { approved: o.answer["approved"] === true };
    if (typeof o.answer["reason"] === "string" && o.answer["reason"]) a.reason = o.answer["reason"];
    return a;
  }
  return { approved: false, reason: o.status === "expired" ? "expired" : (o.reason ?? o.status) };
}

/** A question's answer; an {@link InputNotAnsweredError} if it ended unanswered. */
export function answerOf(o: InputOutcome): unknown {
  if (o.status !== "answered") throw new InputNotAnsweredError(o.requestId, o.status, o.reason);
  return o.answer;
}

/** What the desk did with an outcome: gave it to its ask, saw it again (taken before), or kept it. */
export type Told = "given" | "again" | "kept";

/**
 * @internal The runner's desk of input requests, by key (conversation and
 * request id): who waits for which, the outcomes nobody waited for yet,
 * the requests whose outcome was taken, and those the server says are
 * pending (asked before a restart). Each keeps at most `max` keys, the
 * newest.
 */
export class InputDesk {
  private readonly waiting = new Map<string, (o: InputOutcome) => void>();
  private readonly kept = new Map<string, InputOutcome>();
  private readonly taken = new Set<string>();
  private readonly pending = new Set<string>();

  constructor(private readonly max: number) {}

  /**
   * Starts waiting for key's outcome: `got` resolves with it; `early` is
   * one told before; `known` says the server holds the request pending
   * already (so it is not to be sent again).
   */
  wait(key: string): { got: Promise<InputOutcome>; early: InputOutcome | undefined; known: boolean } {
    if (this.waiting.has(key)) throw new Error(`input request ${key.split("\n")[1] ?? key} is asked already`);
    let resolve!: (o: InputOutcome) => void;
    const got = new Promise<InputOutcome>((r) => (resolve = r));
    this.waiting.set(key, resolve);
    const early = this.kept.get(key);
    this.kept.delete(key);
    return { got, early, known: this.pending.has(key) };
  }

  /** Stops waiting for key. */
  done(key: string): void {
    this.waiting.delete(key);
    this.pending.delete(key);
  }

  /** Notes that key's outcome was taken (and is being acknowledged). */
  took(key: string): void {
    bounded(this.taken, this.max).add(key);
  }

  /** Notes that the server holds key pending. */
  heldPending(key: string): void {
    bounded(this.pending, this.max).add(key);
  }

  /** An outcome came: given to its waiter, seen again (taken before: acknowledge it again), or kept for an ask to come. */
  tell(key: string, o: InputOutcome): Told {
    const w = this.waiting.get(key);
    if (w) {
      w(o);
      return "given";
    }
    if (this.taken.has(key)) return "again";
    this.kept.set(key, o);
    if (this.kept.size > this.max) this.kept.delete(this.kept.keys().next().value!);
    return "kept";
  }
}

/** s, with its oldest key let go if it is full. */
function bounded(s: Set<string>, max: number): Set<string> {
  if (s.size >= max) s.delete(s.values().next().value!);
  return s;
}

/** A promise that rejects when signal aborts (with its reason), and never resolves. */
export function aborted(signal: AbortSignal): Promise<never> {
  const p = new Promise<never>((_, reject) => {
    const stop = (): void => reject(signal.reason instanceof Error ? signal.reason : new Error("the input request was abandoned"));
    if (signal.aborted) stop();
    else signal.addEventListener("abort", stop, { once: true });
  });
  p.catch(() => {});
  return p;
}
