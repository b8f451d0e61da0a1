// A conversation followed live for the page: the client's stream, folded
// with the client's pure functions, one batch per animation frame; the
// reads the stream leaves out (the prompt queue after a snapshot, the head
// once events made it stale, a summarized message when it is shown, older
// messages as the reader scrolls up); and a window of the log's events for
// the flow picture.

import {
  ParleyError,
  emptyState,
  foldFrame,
  holdMessage,
  withQueue,
  withView,
  type ConversationState,
  type Frame,
  type Message,
  type ParleyClient,
  type ParleyEvent,
  type StreamStatus,
  type Subscription,
} from "@parleyhq/client";
import { Batcher, nextFrame, type Schedule } from "./batch";
import { isFlowEvent, mergeEvents } from "./flow";
import { nextSpan, withOlder } from "./older";

/** The older messages: being read, or all read. */
export interface OlderState {
  readonly loading: boolean;
  readonly done: boolean;
}

/** The events the flow picture is drawn from: every event after `after` that moves the conversation on. */
export interface FlowEvents {
  readonly events: readonly ParleyEvent[];
  /** The window starts after this seq (0: at the log's start). */
  readonly after: number;
  readonly loading: boolean;
}

/** What the page shows of a followed conversation. */
export interface LiveSnapshot {
  readonly state: ConversationState;
  readonly status: StreamStatus;
  readonly older: OlderState;
  readonly flow: FlowEvents;
  /** Why following stopped for good (the conversation is gone, the token refused). */
  readonly stopped: ParleyError | null;
}

/** How far back the flow picture reads the log when it opens, and how much it keeps. */
export const FLOW_WINDOW = 4000;
const FLOW_KEEP = 5000;

/** Whether the flow picture keeps an event (and the page's dispatch map reads it). */
export function keepForFlow(e: ParleyEvent): boolean {
  return isFlowEvent(e) || e.type === "prompt.dispatched";
}

/** Options of a {@link LiveView}. */
export interface LiveOptions {
  onError?: (err: unknown) => void;
  /** When to fold what arrived (default: the next animation frame). */
  schedule?: Schedule;
  /** Read the flow's window of the log (default true). */
  flow?: boolean;
}

/** A conversation followed live; see the file's comment. */
export class LiveView {
  private snap: LiveSnapshot;
  private readonly listeners = new Set<() => void>();
  private readonly batcher: Batcher<Frame>;
  private readonly sub: Subscription;
  private readonly busy = new Set<string>();
  private readonly removed = new Set<string>();
  private readonly fetching = new Set<string>();
  private span = 2048;
  private olderRead: Promise<void> | undefined;
  private closed = false;
  private generation = 0;

  constructor(
    private readonly client: ParleyClient,
    readonly conversationId: string,
    private readonly opts: LiveOptions = {},
  ) {
    this.snap = {
      state: emptyState,
      status: { state: "connecting", attempt: 0 },
      older: { loading: false, done: false },
      flow: { events: [], after: 0, loading: false },
      stopped: null,
    };
    this.batcher = new Batcher((frames) => this.fold(frames), opts.schedule ?? nextFrame);
    this.sub = client.subscribe(conversationId, { onStatus: (status) => this.set({ status }) });
    void this.run();
  }

  getSnapshot = (): LiveSnapshot => this.snap;

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  close(): void {
    this.closed = true;
    this.batcher.close();
    this.sub.close();
  }

  private set(p: Partial<LiveSnapshot>): void {
    if (this.closed) return;
    this.snap = { ...this.snap, ...p };
    for (const l of [...this.listeners]) l();
  }

  private async run(): Promise<void> {
    try {
      for await (const frame of this.sub) this.batcher.push(frame);
    } catch (err) {
      this.batcher.flushNow();
      if (err instanceof ParleyError) this.set({ stopped: err });
      else this.opts.onError?.(err);
    }
  }

  /** Folds a batch of frames, then starts the reads the new state needs. */
  private fold(frames: Frame[]): void {
    let s = this.snap.state;
    let flow = this.snap.flow;
    let older = this.snap.older;
    const live: ParleyEvent[] = [];
    let reload = false;
    for (const f of frames) {
      try {
        s = foldFrame(s, f);
      } catch (err) {
        this.opts.onError?.(err); // an event whose data is not what its type says
        continue;
      }
      if (f.type === "init" && !f.init.recovered) {
        // A snapshot: everything held before is dropped.
        this.generation++;
        this.removed.clear();
        live.length = 0;
        older = { loading: false, done: (f.init.messages ?? []).length === 0 };
        flow = { events: [], after: Math.max(0, f.init.position.seq - FLOW_WINDOW), loading: this.opts.flow !== false };
        reload = this.opts.flow !== false;
      } else if (f.type === "event") {
        const e = f.event;
        if (e.type === "messages.removed") for (const id of e.data.messageIds ?? []) this.removed.add(id);
        if (keepForFlow(e)) live.push(e);
      }
    }
    if (live.length > 0) {
      let events = mergeEvents(flow.events, live);
      let after = flow.after;
      if (events.length > FLOW_KEEP) {
        after = events[events.length - FLOW_KEEP - 1]!.seq;
        events = events.slice(events.length - FLOW_KEEP);
      }
      flow = { ...flow, events, after };
    }
    this.set({ state: s, flow, older });
    if (reload && s.position) void this.readFlow(flow.after, s.position.seq, this.generation);
    this.catchUp();
  }

  private catchUp(): void {
    if (this.closed) return;
    const s = this.snap.state;
    if (!s.queue.known && s.position !== null) {
      this.once("queue", async () => {
        const q = await this.client.promptQueue(this.conversationId);
        // Not exact (prompts kept changing while it was read): read again
        // in a moment rather than show a queue that may be wrong.
        if (!q.exact) return new Promise<void>((done) => setTimeout(done, 1000));
        this.set({ state: withQueue(this.snap.state, q.prompts, q.asOf) });
      });
    }
    if (s.headStale) {
      this.once("view", async () => {
        const v = await this.client.conversation(this.conversationId);
        this.set({ state: withView(this.snap.state, v) });
      });
    }
  }

  private once(kind: string, read: () => Promise<void>): void {
    if (this.busy.has(kind)) return;
    this.busy.add(kind);
    read().then(
      () => {
        this.busy.delete(kind);
        this.catchUp();
      },
      (err: unknown) => {
        this.busy.delete(kind);
        if (!this.closed) this.opts.onError?.(err);
      },
    );
  }

  /** Reads the log's events after `after` up to `until` for the flow picture. */
  private async readFlow(after: number, until: number, gen: number): Promise<void> {
    const got: ParleyEvent[] = [];
    try {
      let at = after;
      while (at < until) {
        const page = await this.client.events(this.conversationId, { after: at, limit: 1000 });
        for (const e of page.events) if (e.seq <= until && keepForFlow(e)) got.push(e);
        const last = page.events[page.events.length - 1];
        if (page.nextAfter === undefined || last === undefined) break;
        at = last.seq;
      }
    } catch (err) {
      if (!this.closed) this.opts.onError?.(err);
    }
    if (gen !== this.generation) return;
    const flow = this.snap.flow;
    this.set({ flow: { ...flow, events: mergeEvents(got, flow.events), loading: false } });
  }

  /** Reads the flow's events before its window (another {@link FLOW_WINDOW} seqs). */
  async loadEarlierFlow(): Promise<void> {
    const flow = this.snap.flow;
    if (flow.after === 0 || flow.loading) return;
    const gen = this.generation;
    const from = Math.max(0, flow.after - FLOW_WINDOW);
    this.set({ flow: { ...flow, loading: true } });
    const got: ParleyEvent[] = [];
    try {
      let at = from;
      while (at < flow.after) {
        const page = await this.client.events(this.conversationId, { after: at, limit: 1000 });
        for (const e of page.events) if (e.seq <= flow.after && keepForFlow(e)) got.push(e);
        const last = page.events[page.events.length - 1];
        if (page.nextAfter === undefined || last === undefined) break;
        at = last.seq;
      }
    } catch (err) {
      this.opts.onError?.(err);
      if (gen === this.generation) this.set({ flow: { ...this.snap.flow, loading: false } });
      return;
    }
    if (gen !== this.generation) return;
    const now = this.snap.flow;
    this.set({ flow: { events: mergeEvents(got, now.events), after: from, loading: false } });
  }

  /**
   * Reads older messages: those before the first one held, about a page of
   * them. Resolves once they are held (or there are none).
   */
  loadOlder(): Promise<void> {
    this.olderRead ??= this.readOlder().finally(() => (this.olderRead = undefined));
    return this.olderRead;
  }

  private async readOlder(): Promise<void> {
    if (this.snap.older.done || this.closed) return;
    const first = this.snap.state.messages[0];
    if (!first) {
      this.set({ older: { loading: false, done: true } });
      return;
    }
    const gen = this.generation;
    this.set({ older: { loading: true, done: false } });
    const before = first.seq;
    const got: Message[] = [];
    let from = before;
    try {
      while (got.length === 0 && from > 0) {
        from = Math.max(0, before - this.span);
        let after = from;
        for (;;) {
          const page = await this.client.messages(this.conversationId, { after, limit: 500 });
          for (const m of page.messages) if (m.seq < before) got.push(m);
          const last = page.messages[page.messages.length - 1];
          if (page.nextAfter === undefined || last === undefined || last.seq >= before) break;
          after = page.nextAfter;
        }
        this.span = nextSpan(before - from, got.length);
      }
    } catch (err) {
      if (gen === this.generation) this.set({ older: { loading: false, done: false } });
      throw err;
    }
    if (gen !== this.generation) return;
    this.set({ state: withOlder(this.snap.state, got, this.removed), older: { loading: false, done: from === 0 } });
  }

  /** Reads older messages until the one at seq is held (or none is left). */
  async loadUntil(seq: number): Promise<void> {
    for (let i = 0; i < 1000; i++) {
      const first = this.snap.state.messages[0];
      if (!first || first.seq <= seq || this.snap.older.done || this.closed) return;
      this.span = Math.max(this.span, first.seq - seq + 1);
      await this.loadOlder();
    }
  }

  /** Reads message id whole (a summarized one) and holds it in place of the summary. */
  async fetchMessage(id: string): Promise<void> {
    if (this.fetching.has(id)) return;
    this.fetching.add(id);
    try {
      const m = await this.client.message(this.conversationId, id);
      this.set({ state: holdMessage(this.snap.state, m) });
    } finally {
      this.fetching.delete(id);
    }
  }
}
