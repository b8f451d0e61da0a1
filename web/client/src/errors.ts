import type { Head } from "./types.js";

/** The error codes the server answers with (see docs/api.md, Errors). */
export type ErrorCode =
  | "invalid_request"
  | "unauthorized"
  | "forbidden"
  | "not_found"
  | "method_not_allowed"
  | "turn_conflict"
  | "precondition_failed"
  | "claim_conflict"
  | "conversation_closed"
  | "busy"
  | "not_answering"
  | "input_ended"
  | "too_large"
  | "unsupported_media_type"
  | "invalid_thread"
  | "idempotency_mismatch"
  | "invalid_value"
  | "rate_limited"
  | "internal"
  | "unavailable";

/**
 * An error from the server: an answer that was not 2xx (`status` is its
 * HTTP status), or an error frame that ended a stream (`status` is 0). The
 * server's message says what to do. A 409 from the turn rules carries the
 * conversation's `head`; other details (`queueLength`, `maxQueueLength`,
 * `retryAfterSeconds`, `maxDepth`, …) are in `details`.
 */
export class ParleyError extends Error {
  override readonly name = "ParleyError";
  readonly status: number;
  readonly code: ErrorCode | (string & {});
  readonly head: Head | undefined;
  readonly details: Readonly<Record<string, unknown>>;

  constructor(status: number, code: string, message: string, head?: Head, details: Record<string, unknown> = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.head = head;
    this.details = details;
  }

  /** How long the server asks to wait before a retry, in seconds (a 429). */
  get retryAfterSeconds(): number | undefined {
    const v = this.details["retryAfterSeconds"];
    return typeof v === "number" ? v : undefined;
  }

  /** How many prompts the queue holds (a 409 `busy` for a full queue). */
  get queueLength(): number | undefined {
    const v = this.details["queueLength"];
    return typeof v === "number" ? v : undefined;
  }

  /** The most prompts the queue may hold (a 409 `busy` for a full queue). */
  get maxQueueLength(): number | undefined {
    const v = this.details["maxQueueLength"];
    return typeof v === "number" ? v : undefined;
  }
}

/**
 * Makes the error of a body `{error: {code, message, head?, ...details}}`
 * (the text of an answer or an error frame). A body of another shape, such
 * as a proxy's error page, becomes code `internal` with the start of the
 * text as its message.
 */
export function errorFromBody(status: number, text: string, retryAfter?: string | null): ParleyError {
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    body = undefined;
  }
  const e = isRecord(body) && isRecord(body["error"]) ? body["error"] : undefined;
  if (!e || typeof e["code"] !== "string" || e["code"] === "") {
    const start = text.length > 200 ? text.slice(0, 200) + "…" : text;
    return new ParleyError(status, "internal", `HTTP ${status}: ${start}`);
  }
  const { code, message, head, ...details } = e;
  if (details["retryAfterSeconds"] === undefined && retryAfter) {
    const n = Number(retryAfter);
    if (Number.isFinite(n)) details["retryAfterSeconds"] = n;
  }
  return new ParleyError(status, code, typeof message === "string" ? message : "", isRecord(head) ? (head as unknown as Head) : undefined, details);
}

/** The error of an answer that is not 2xx (its body is read, at most 1 MiB of it). */
export async function responseError(res: Response): Promise<ParleyError> {
  let text = "";
  try {
    text = await readText(res, 1 << 20);
  } catch {
    // the body went away: the status says enough
  }
  return errorFromBody(res.status, text, res.headers.get("Retry-After"));
}

async function readText(res: Response, max: number): Promise<string> {
  if (!res.body) return "";
  const reader = res.body.getReader();
  const decoder = new TextDecoder();
  let text = "";
  let n = 0;
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    n += value.length;
    text += decoder.decode(value, { stream: true });
    if (n >= max) {
      await reader.cancel();
      break;
    }
  }
  return text + decoder.decode();
}

/**
 * Reports whether reconnecting cannot help after err: an answer 4xx other
 * than 408 and 429 (a bad token, an unknown or deleted conversation, a
 * malformed position), or an error frame `not_found`, `unauthorized` or
 * `forbidden`.
 */
export function isFatal(err: unknown): boolean {
  if (!(err instanceof ParleyError)) return false;
  if (err.status === 0) return err.code === "not_found" || err.code === "unauthorized" || err.code === "forbidden";
  return err.status >= 400 && err.status < 500 && err.status !== 408 && err.status !== 429;
}

export function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
