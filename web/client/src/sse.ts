// A streaming parser of text/event-stream, over bytes as they arrive (from
// a fetch body), with a bound on the size of one event.

/** One event of a text/event-stream. */
export interface SSEMessage {
  /** The `event:` field; empty when there was none. */
  event: string;
  /** The `data:` lines, joined by newlines. */
  data: string;
  /** The `id:` field, if the event had one. */
  id?: string;
}

/** Thrown when one event of a stream is larger than the parser's bound. */
export class FrameTooLargeError extends Error {
  override readonly name = "FrameTooLargeError";
  constructor(max: number) {
    super(`a frame from the server is over the size limit of ${max} bytes`);
  }
}

const LF = 0x0a;

/**
 * Parses text/event-stream: `event`, `data` and `id` fields; a blank line
 * ends an event; comment lines (`: ping`) are skipped; lines end with LF or
 * CRLF. One event (its lines as they arrived) is at most `maxBytes`: past
 * that, `push` throws {@link FrameTooLargeError} and the stream must be
 * dropped. What it holds between calls is at most that much.
 */
export class SSEParser {
  private readonly decoder = new TextDecoder();
  private partial: Uint8Array[] = [];
  private partialBytes = 0;
  private eventBytes = 0;
  private event = "";
  private data: string[] = [];
  private id: string | undefined;

  constructor(private readonly maxBytes: number) {}

  /** Takes the next bytes of the stream and returns the events they complete. */
  push(chunk: Uint8Array): SSEMessage[] {
    const out: SSEMessage[] = [];
    let start = 0;
    for (;;) {
      const end = chunk.indexOf(LF, start);
      if (end < 0) break;
      this.grow(end - start + 1);
      let line: Uint8Array = chunk.subarray(start, end);
      if (this.partial.length > 0) {
        this.partial.push(line);
        line = concat(this.partial, this.partialBytes + line.length);
        this.partial = [];
        this.partialBytes = 0;
      }
      this.line(line, out);
      start = end + 1;
    }
    if (start < chunk.length) {
      const rest = chunk.subarray(start);
      this.grow(rest.length);
      // Keep a copy: the caller may reuse its buffer.
      this.partial.push(rest.slice());
      this.partialBytes += rest.length;
    }
    return out;
  }

  private grow(n: number): void {
    this.eventBytes += n;
    if (this.eventBytes > this.maxBytes) throw new FrameTooLargeError(this.maxBytes);
  }

  private line(bytes: Uint8Array, out: SSEMessage[]): void {
    let text = this.decoder.decode(bytes);
    if (text.endsWith("\r")) text = text.slice(0, -1);
    if (text === "") {
      if (this.data.length > 0) {
        const m: SSEMessage = { event: this.event, data: this.data.join("\n") };
        if (this.id !== undefined) m.id = this.id;
        out.push(m);
      }
      this.event = "";
      this.data = [];
      this.id = undefined;
      this.eventBytes = 0;
      return;
    }
    if (text.startsWith(":")) {
      if (this.data.length === 0 && this.event === "") this.eventBytes = 0; // a comment between events
      return;
    }
    const colon = text.indexOf(":");
    const field = colon < 0 ? text : text.slice(0, colon);
    let value = colon < 0 ? "" : text.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    switch (field) {
      case "event":
        this.event = value;
        break;
      case "data":
        this.data.push(value);
        break;
      case "id":
        this.id = value;
        break;
    }
  }
}

function concat(parts: Uint8Array[], n: number): Uint8Array {
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}
