// The two ways to read a stream's frames: SSE over fetch, and WebSocket.

import { ParleyError, responseError } from "./errors.js";
import { FrameTooLargeError, SSEParser } from "./sse.js";
import { utf8Length } from "./state.js";
import type { FetchLike, WebSocketLike } from "./options.js";

/** One frame as it arrived: its SSE event name (empty on a WebSocket) and its JSON text. */
export interface RawFrame {
  event: string;
  data: string;
}

/** One connection of a stream. */
export interface Connection {
  /** The next frame; null once the server ended the connection. It rejects when the connection failed. */
  next(): Promise<RawFrame | null>;
  close(): void;
}

/**
 * Opens an SSE stream with fetch (so that it can send the Authorization
 * header) and reads it with a streaming parser. A refusal (an answer that
 * is not 200) rejects with the server's error.
 */
export async function openSSE(fetchImpl: FetchLike, url: string, headers: Record<string, string>, signal: AbortSignal, maxFrame: number): Promise<Connection> {
  const ctl = new AbortController();
  const stop = (): void => ctl.abort();
  signal.addEventListener("abort", stop, { once: true });
  if (signal.aborted) ctl.abort();
  try {
    const res = await fetchImpl(url, { headers, signal: ctl.signal, cache: "no-store" });
    if (!res.ok) throw await responseError(res);
    const type = res.headers.get("Content-Type") ?? "";
    if (!type.startsWith("text/event-stream") || !res.body) {
      await res.body?.cancel();
      throw new Error(`the stream answered ${type || "no content type"}, not text/event-stream`);
    }
    const reader = res.body.getReader();
    const parser = new SSEParser(maxFrame);
    let queue: RawFrame[] = [];
    let at = 0;
    return {
      async next() {
        while (at >= queue.length) {
          const { value, done } = await reader.read();
          if (done) return null;
          queue = parser.push(value).map((m) => ({ event: m.event, data: m.data }));
          at = 0;
        }
        return queue[at++]!;
      },
      close() {
        signal.removeEventListener("abort", stop);
        ctl.abort();
        reader.cancel().catch(() => {});
      },
    };
  } catch (err) {
    signal.removeEventListener("abort", stop);
    ctl.abort();
    throw err;
  }
}

/** Raised when a WebSocket closed before it opened (a browser does not say why). */
export class WSNotOpened extends Error {
  override readonly name = "WSNotOpened";
}

/** Raised when a WebSocket's frames waited for the reader past the bound: reconnect once caught up. */
export class BufferFullError extends Error {
  override readonly name = "BufferFullError";
}

/**
 * Opens a WebSocket stream. A WebSocket cannot be paused, so frames wait
 * for the reader in a queue of at most maxBuffered bytes; past it the
 * connection is dropped, the frames already queued are still delivered, and
 * then the connection fails (the subscription resumes from there). The
 * close codes 4404, 4401 and 4403 fail it with `not_found`, `unauthorized`
 * and `forbidden`.
 */
export function openWS(WS: WebSocketLike, url: string, signal: AbortSignal, maxFrame: number, maxBuffered: number): Promise<Connection> {
  return new Promise((resolve, reject) => {
    const ws = new WS(url);
    let opened = false;
    const queue: RawFrame[] = [];
    let at = 0;
    let buffered = 0;
    let ended: { error?: Error } | undefined;
    let wake: (() => void) | undefined;
    const stop = (): void => ws.close();
    signal.addEventListener("abort", stop, { once: true });
    const end = (error?: Error): void => {
      if (ended) return;
      ended = error === undefined ? {} : { error };
      signal.removeEventListener("abort", stop);
      if (ws.readyState === ws.CONNECTING || ws.readyState === ws.OPEN) ws.close();
      wake?.();
    };
    const conn: Connection = {
      async next() {
        while (at >= queue.length) {
          if (ended) {
            if (ended.error !== undefined) throw ended.error;
            return null;
          }
          await new Promise<void>((r) => (wake = r));
          wake = undefined;
        }
        const f = queue[at++]!;
        buffered -= f.data.length;
        if (at > 1024 && at * 2 > queue.length) {
          queue.splice(0, at);
          at = 0;
        }
        return f;
      },
      close() {
        end();
      },
    };
    ws.onopen = () => {
      opened = true;
      resolve(conn);
    };
    ws.onmessage = (ev: MessageEvent) => {
      if (ended || typeof ev.data !== "string") return;
      const data = ev.data;
      if (data.length > maxFrame || (data.length * 3 > maxFrame && utf8Length(data) > maxFrame)) {
        end(new FrameTooLargeError(maxFrame));
        return;
      }
      buffered += data.length;
      queue.push({ event: "", data });
      if (buffered > maxBuffered) end(new BufferFullError(`more than ${maxBuffered} bytes of frames waited for the reader`));
      wake?.();
    };
    ws.onclose = (ev: CloseEvent) => {
      if (!opened) {
        signal.removeEventListener("abort", stop);
        reject(new WSNotOpened(`the WebSocket closed before it opened (code ${ev.code})`));
        return;
      }
      if (ev.code === 4404) end(new ParleyError(0, "not_found", ev.reason || "the conversation was deleted"));
      else if (ev.code === 4401) end(new ParleyError(0, "unauthorized", ev.reason || "the token of this connection was revoked"));
      else if (ev.code === 4403) end(new ParleyError(0, "forbidden", ev.reason || "this connection may no longer read the conversation"));
      else end();
    };
    ws.onerror = () => {
      // a close follows
    };
  });
}
