// A conversation's live stream that reconnects by itself and resumes from
// the last position it delivered (docs/stream.md).

import { ParleyError, errorFromBody, isFatal, isRecord } from "./errors.js";
import type { FetchLike, WebSocketLike } from "./options.js";
import { WSNotOpened, openSSE, openWS, type Connection, type RawFrame } from "./transport.js";
import type { Frame, Guidance, Init, ParleyEvent, Position } from "./types.js";

/** The largest frame the server sends, and what a subscription accepts (parley.MaxFrameBytes). */
export const MAX_FRAME_BYTES = 32 << 20;

/**
 * What a subscription needs of its client (a ParleyClient is one): how to
 * reach the server, and the conversation read that tells why a WebSocket
 * did not open.
 */
export interface StreamClient {
  readonly token: string | undefined;
  readonly fetchImpl: FetchLike;
  readonly WebSocketImpl: WebSocketLike | undefined;
  /** The absolute URL of a path of the server (with a query). */
  url(path: string, query?: Record<string, string | number | undefined>): string;
  /** The headers of every request: the token, if any. */
  headers(): Record<string, string>;
  /** Reads the conversation; a refusal rejects with its ParleyError. */
  conversation(id: string): Promise<unknown>;
}

/** How a subscription connects. */
export type Transport = "sse" | "ws";

/** Options of `ParleyClient.subscribe`. */
export interface SubscribeOptions {
  /**
   * Resume after this position: `{seq, epoch}` gets every event after seq
   * (an init with `recovered: true`), `{seq: 0}` the whole log. Left out: a
   * snapshot (an init with `recovered: false` and the newest messages).
   */
  from?: Position;
  /** `sse` (the default: fetch and a streaming parser) or `ws` (needs a WebSocket). */
  transport?: Transport;
  /** The first wait before a reconnect, in ms (default 100); it doubles after each failure. */
  minBackoffMs?: number;
  /** The longest wait before a reconnect, in ms (default 5000). */
  maxBackoffMs?: number;
  /** The largest frame accepted, in bytes (default {@link MAX_FRAME_BYTES}); a larger one drops the connection. */
  maxFrameBytes?: number;
  /**
   * WebSocket only: how many bytes of frames may wait for the reader (a
   * WebSocket cannot be paused); past it the connection is dropped and
   * resumed once the reader has caught up (default 64 MiB).
   */
  maxBufferedBytes?: number;
  /** Ends the subscription, as `close()` does. */
  signal?: AbortSignal;
  /** Told of every change of the connection's state. */
  onStatus?: (status: StreamStatus) => void;
  /** The random numbers of the backoff's jitter, in [0, 1) (default Math.random). */
  random?: () => number;
}

/** The state of a subscription's connection. */
export type StreamStatus =
  | { state: "connecting"; attempt: number }
  | { state: "live"; recovered: boolean }
  | { state: "waiting"; attempt: number; delayMs: number; error: unknown }
  | { state: "stopped"; error: ParleyError }
  | { state: "closed" };

/**
 * The wait before reconnect number `attempt` (0 for the first): the backoff
 * doubles from `minMs` up to `maxMs`, and the wait is a random point in its
 * upper half, so that clients cut off together do not come back together.
 */
export function backoffDelay(attempt: number, minMs: number, maxMs: number, random: () => number = Math.random): number {
  const d = Math.min(maxMs, minMs * 2 ** Math.min(attempt, 30));
  return d / 2 + (random() * d) / 2;
}

/** Raised inside a subscription when an event is missing; it makes it reconnect. */
export class GapError extends Error {
  override readonly name = "GapError";
}

/**
 * A conversation's live stream. Iterate it (`for await (const frame of
 * sub)`) to get an init after each connect, then every event exactly once
 * and in order, with guidance frames between them. It reconnects by itself
 * after a failure, waiting with exponential backoff and jitter, and
 * resumes after the last event it yielded: it never yields an event twice
 * and never skips one (a gap in what the server sends makes it reconnect).
 * An init with `recovered: false` means the history could not be resumed
 * (it was replaced, or no position was given): start over from its
 * snapshot.
 *
 * It stops for good, and the iteration throws the server's
 * {@link ParleyError}, when reconnecting cannot help: an answer 4xx (401 a
 * bad token, 403, 404 an unknown conversation; but not 429), the error
 * frames `not_found` (the conversation was deleted), `unauthorized` (the
 * token was revoked) and `forbidden` (a delegate's turn ended), and the
 * WebSocket close codes 4404, 4401 and 4403. `close()`
 * ends it: the iteration then ends.
 */
export class Subscription implements AsyncIterable<Frame> {
  private pos: Position | undefined;
  private closed = false;
  private readonly abort = new AbortController();
  private readonly opts: Required<Omit<SubscribeOptions, "from" | "signal" | "onStatus">> & Pick<SubscribeOptions, "onStatus">;
  private gen: AsyncGenerator<Frame, void, undefined> | undefined;
  private connections = 0;

  constructor(
    private readonly client: StreamClient,
    readonly conversationId: string,
    opts: SubscribeOptions = {},
  ) {
    this.pos = opts.from ? { ...opts.from } : undefined;
    this.opts = {
      transport: opts.transport ?? "sse",
      minBackoffMs: opts.minBackoffMs ?? 100,
      maxBackoffMs: opts.maxBackoffMs ?? 5000,
      maxFrameBytes: opts.maxFrameBytes ?? MAX_FRAME_BYTES,
      maxBufferedBytes: opts.maxBufferedBytes ?? 64 << 20,
      random: opts.random ?? Math.random,
      onStatus: opts.onStatus,
    };
    if (this.opts.transport === "ws" && !client.WebSocketImpl) {
      throw new TypeError("no WebSocket here: use the sse transport, or pass ClientOptions.WebSocket");
    }
    if (opts.signal) {
      if (opts.signal.aborted) this.close();
      else opts.signal.addEventListener("abort", () => this.close(), { once: true });
    }
  }

  /** The position of the last frame yielded (an init's or an event's); undefined before any. */
  get position(): Position | undefined {
    return this.pos ? { ...this.pos } : undefined;
  }

  /** How many connections it has opened (each connect and reconnect). */
  get connectionCount(): number {
    return this.connections;
  }

  /** Ends the subscription and its connection; an iteration under way ends. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.abort.abort();
    this.status({ state: "closed" });
  }

  /** The next frame, or done once closed. */
  next(): Promise<IteratorResult<Frame, void>> {
    this.gen ??= this.run();
    return this.gen.next();
  }

  [Symbol.asyncIterator](): AsyncIterator<Frame, void, undefined> {
    return {
      next: () => this.next(),
      return: async () => {
        this.close();
        if (this.gen) await this.gen.return();
        return { done: true, value: undefined };
      },
    };
  }

  private status(s: StreamStatus): void {
    try {
      this.opts.onStatus?.(s);
    } catch {
      // a listener's failure is not the stream's
    }
  }

  private async *run(): AsyncGenerator<Frame, void, undefined> {
    let attempt = 0;
    while (!this.closed) {
      let conn: Connection | undefined;
      let cause: unknown;
      try {
        this.status({ state: "connecting", attempt });
        this.connections++;
        conn = await this.connect();
        for (;;) {
          const raw = await conn.next();
          if (raw === null) throw new Error("the server ended the stream");
          const f = this.accept(raw);
          if (f === undefined) continue;
          attempt = 0;
          if (f.type === "init") this.status({ state: "live", recovered: f.init.recovered });
          yield f;
          if (this.closed) return;
        }
      } catch (err) {
        cause = err;
      } finally {
        conn?.close();
      }
      if (this.closed) return;
      if (cause instanceof WSNotOpened) cause = await this.probe(cause);
      if (isFatal(cause)) {
        this.closed = true;
        this.status({ state: "stopped", error: cause as ParleyError });
        throw cause;
      }
      let delay = backoffDelay(attempt, this.opts.minBackoffMs, this.opts.maxBackoffMs, this.opts.random);
      if (cause instanceof ParleyError && cause.retryAfterSeconds !== undefined) delay = Math.max(delay, cause.retryAfterSeconds * 1000);
      this.status({ state: "waiting", attempt, delayMs: delay, error: cause });
      attempt++;
      await sleep(delay, this.abort.signal);
    }
  }

  private connect(): Promise<Connection> {
    const path = "/v1/conversations/" + encodeURIComponent(this.conversationId) + (this.opts.transport === "ws" ? "/ws" : "/stream");
    const p = this.pos;
    if (this.opts.transport === "ws") {
      const q: Record<string, string | undefined> = {};
      if (p) {
        q["after"] = String(p.seq);
        if (p.epoch) q["epoch"] = p.epoch;
      }
      if (this.client.token) q["token"] = this.client.token;
      return openWS(this.client.WebSocketImpl!, wsURL(this.client.url(path, q)), this.abort.signal, this.opts.maxFrameBytes, this.opts.maxBufferedBytes);
    }
    const headers: Record<string, string> = { Accept: "text/event-stream", ...this.client.headers() };
    let url = this.client.url(path);
    if (p?.epoch) headers["Last-Event-ID"] = `${p.epoch}:${p.seq}`;
    else if (p) url = this.client.url(path, { after: p.seq });
    return openSSE(this.client.fetchImpl, url, headers, this.abort.signal, this.opts.maxFrameBytes);
  }

  /**
   * A WebSocket that did not open says nothing of why (a browser shows no
   * status): ask the conversation over HTTP, whose refusal (401, 403, 404)
   * says that reconnecting cannot help.
   */
  private async probe(cause: WSNotOpened): Promise<unknown> {
    try {
      await this.client.conversation(this.conversationId);
    } catch (err) {
      if (isFatal(err)) return err;
    }
    return cause;
  }

  /** Decodes a frame and moves the position; undefined for an event already yielded. */
  private accept(raw: RawFrame): Frame | undefined {
    const data: unknown = JSON.parse(raw.data);
    if (!isRecord(data)) throw new Error("a frame that is not a JSON object");
    const type = raw.event || (typeof data["type"] === "string" ? data["type"] : "");
    switch (type) {
      case "init": {
        const init = data as unknown as Init & { type?: string };
        delete init.type;
        this.pos = { ...init.position };
        return { type: "init", init };
      }
      case "guidance":
        if (!isRecord(data["data"])) return undefined;
        return { type: "guidance", guidance: data["data"] as unknown as Guidance };
      case "error":
        throw errorFromBody(0, raw.data);
      default: {
        const ev = data as unknown as ParleyEvent;
        if (typeof ev.seq !== "number") throw new Error(`a ${type} frame without a seq`);
        if (this.pos && ev.seq <= this.pos.seq) return undefined;
        if (this.pos && ev.seq !== this.pos.seq + 1) throw new GapError(`gap in the stream: seq ${ev.seq} after ${this.pos.seq}`);
        this.pos = { seq: ev.seq, epoch: this.pos?.epoch ?? "" };
        return { type: "event", event: ev };
      }
    }
  }
}

/** @internal The ws: or wss: URL of an http(s) URL (relative to the page in a browser). */
export function wsURL(u: string): string {
  const base = (globalThis as { location?: { href: string } }).location?.href;
  const url = base ? new URL(u, base) : new URL(u);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  return url.toString();
}

/** @internal Waits ms, or until signal aborts. */
export function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener("abort", done);
      resolve();
    }
    signal.addEventListener("abort", done, { once: true });
  });
}
