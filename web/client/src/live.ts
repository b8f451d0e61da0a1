// Small classes around the pure folds: ConversationFold holds a state and
// tells listeners when it changes (React's useSyncExternalStore takes its
// subscribe and getSnapshot as they are); LiveConversation also follows the
// stream, folds what arrives (at once, or a batch per frame drawn), and reads
// over HTTP what the stream leaves out, and older messages when asked.

import { Batcher, type Schedule } from "./batch.js";
import type { ParleyClient } from "./client.js";
import { ParleyError } from "./errors.js";
import { nextSpan, withOlder } from "./older.js";
import * as st from "./state.js";
import type { ConversationState } from "./state.js";
import type { StreamStatus, SubscribeOptions, Subscription } from "./stream.js";
import type { Frame, Message, ParleyEvent, QueuedPrompt, View } from "./types.js";

/** How long a follower waits before it reads the prompt queue again after a read that was not exact. */
const queueRetryMs = 1000;

/** A conversation's state folded frame by frame, with listeners. Not safe to share between threads (there are none). */
export class ConversationFold {
  private s: ConversationState = st.emptyState;
  private readonly listeners = new Set<() => void>();

  /** The state: a new object whenever something changed, the same one otherwise. */
  get state(): ConversationState {
    return this.s;
  }

  /** The messages, in seq order. */
  get messages(): ConversationState["messages"] {
    return this.s.messages;
  }

  /** The text agents stream in a v1 conversation before a message holds it. */
  get streaming(): ConversationState["streaming"] {
    return this.s.streaming;
  }

  /** Folds one frame of a stream in ({@link st.foldFrame}). */
  apply(frame: Frame): void {
    this.set(st.foldFrame(this.s, frame));
  }

  /**
   * Folds frames in, in order, with one change for them all. A frame whose
   * fold throws (an event whose data is not what its type says) is left
   * out, its error handed to onError. Returns the frames folded.
   */
  applyAll(frames: readonly Frame[], onError?: (err: unknown) => void): Frame[] {
    let s = this.s;
    const folded: Frame[] = [];
    for (const f of frames) {
      try {
        s = st.foldFrame(s, f);
        folded.push(f);
      } catch (err) {
        onError?.(err);
      }
    }
    this.set(s);
    return folded;
  }

  /** Folds one event of the log in (from `GET …/events`). */
  applyEvent(e: ParleyEvent): void {
    this.set(st.applyEvent(this.s, e));
  }

  /** The ids of the messages held summarized: read each and give it to {@link hold}. */
  missing(): string[] {
    return st.missing(this.s);
  }

  /** Puts a message read over HTTP in place of a summarized or older copy; reports whether it took it. */
  hold(m: Message): boolean {
    const before = this.s;
    this.set(st.holdMessage(this.s, m));
    return this.s !== before;
  }

  /** Takes a view read over HTTP (head and guidance). */
  withView(v: View): void {
    this.set(st.withView(this.s, v));
  }

  /** Puts older messages read over HTTP before the first one held, but none of those in removed ({@link withOlder}). */
  withOlder(older: readonly Message[], removed: ReadonlySet<string>): void {
    this.set(withOlder(this.s, older, removed));
  }

  /** Takes the prompt queue read over HTTP, exact as of seq asOf. */
  withQueue(prompts: readonly QueuedPrompt[], asOf: number): void {
    this.set(st.withQueue(this.s, prompts, asOf));
  }

  /** Calls listener after every change; returns the function that stops it. */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** The state (for useSyncExternalStore). */
  getSnapshot = (): ConversationState => this.s;

  private set(next: ConversationState): void {
    if (next === this.s) return;
    this.s = next;
    for (const l of [...this.listeners]) l();
  }
}

/** Options of {@link follow}. */
export interface FollowOptions extends SubscribeOptions {
  /** Read the messages a snapshot summarized (default true). */
  fetchMissing?: boolean;
  /** Read the prompt queue when the stream does not say it (default true). */
  queue?: boolean;
  /** Read the view again when events made the head stale (default true). */
  view?: boolean;
  /** The error of a read that failed (the stream goes on). */
  onError?: (err: unknown) => void;
  /**
   * When to fold what arrived: the frames that arrive before it calls back
   * are folded together, with one change (`nextFrame`: one per frame
   * a page draws, however fast text deltas come). Left out: each frame at
   * once.
   */
  schedule?: Schedule;
  /** Told of the frames just folded, and the state after them, before the listeners hear of the change. */
  onFrames?: (frames: readonly Frame[], state: ConversationState) => void;
}

/** The older messages (before those a snapshot holds): being read, or all read. */
export interface OlderState {
  readonly loading: boolean;
  readonly done: boolean;
}

/** What a followed conversation shows: its state, its connection's, and its older messages'. */
export interface LiveSnapshot {
  readonly state: ConversationState;
  readonly status: StreamStatus;
  readonly older: OlderState;
}

/**
 * A conversation followed live: the stream folded into its state, with
 * what the stream leaves out read over HTTP: the messages a snapshot
 * summarized, the prompt queue after a snapshot, and the view (head and
 * guidance) when events may have changed the head. Reads are one at a time
 * of each kind, so a burst of events costs one read. Older messages than a
 * snapshot holds are read when asked ({@link LiveConversation.loadOlder}),
 * and a summarized message read whole when asked
 * ({@link LiveConversation.fetchMessage}).
 *
 * ```ts
 * const live = follow(client, conversationId);
 * const off = live.subscribe(() => render(live.getSnapshot()));
 * // … later
 * live.close();
 * ```
 */
export class LiveConversation {
  readonly fold = new ConversationFold();
  readonly subscription: Subscription;
  private snap: LiveSnapshot;
  private readonly listeners = new Set<() => void>();
  private readonly busy = new Set<string>();
  private readonly gone = new Set<string>();
  private readonly batcher: Batcher<Frame> | undefined;
  /** The messages the stream removed since its last snapshot: an older page read meanwhile must not bring them back. */
  private readonly removed = new Set<string>();
  private readonly fetching = new Set<string>();
  /** How many seqs before the first message held the next older read spans. */
  private span = 2048;
  private olderRead: Promise<void> | undefined;
  /** Counts snapshots: a read started before the latest one is dropped. */
  private generation = 0;
  /** True while a change of the fold is part of a bigger one, told once. */
  private hushed = false;
  private closed = false;
  /** Resolves when the stream has ended (closed, or stopped for good). */
  readonly done: Promise<void>;

  constructor(
    private readonly client: ParleyClient,
    readonly conversationId: string,
    private readonly opts: FollowOptions = {},
  ) {
    this.snap = { state: this.fold.state, status: { state: "connecting", attempt: 0 }, older: { loading: false, done: false } };
    if (opts.schedule) this.batcher = new Batcher((frames) => this.foldFrames(frames), opts.schedule);
    this.subscription = client.subscribe(conversationId, {
      ...opts,
      onStatus: (s) => {
        if (s.state === "stopped") this.batcher?.flushNow(); // what came before the stop first
        this.update({ status: s });
        opts.onStatus?.(s);
      },
    });
    this.fold.subscribe(() => {
      if (!this.hushed) this.changed({});
    });
    this.done = this.run();
  }

  /** The state, the connection's status and the older messages': a new object whenever one changed. */
  getSnapshot = (): LiveSnapshot => this.snap;

  /** Calls listener after every change; returns the function that stops it. */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** Stops following. */
  close(): void {
    this.closed = true;
    this.batcher?.close();
    this.subscription.close();
  }

  private async run(): Promise<void> {
    try {
      for await (const frame of this.subscription) {
        if (this.batcher) this.batcher.push(frame);
        else this.foldFrames([frame]);
      }
    } catch (err) {
      this.batcher?.flushNow();
      if (!(err instanceof ParleyError)) this.opts.onError?.(err);
    }
  }

  /** Folds frames in with one change; a snapshot among them starts the older messages over. */
  private foldFrames(frames: readonly Frame[]): void {
    let older = this.snap.older;
    let folded: Frame[];
    this.hushed = true;
    try {
      folded = this.fold.applyAll(frames, this.opts.onError);
    } finally {
      this.hushed = false;
    }
    for (const f of folded) {
      if (f.type === "init" && !f.init.recovered) {
        // A snapshot: everything held before is dropped.
        this.generation++;
        this.removed.clear();
        older = { loading: false, done: (f.init.messages ?? []).length === 0 };
      } else if (f.type === "event" && f.event.type === "messages.removed") {
        for (const id of f.event.data.messageIds ?? []) this.removed.add(id);
      }
    }
    if (folded.length > 0) this.opts.onFrames?.(folded, this.fold.state);
    if (this.fold.state !== this.snap.state || older !== this.snap.older) this.changed({ older });
  }

  /** Tells the listeners of a change of the fold (with p), then starts the reads the state needs. */
  private changed(p: Partial<LiveSnapshot>): void {
    this.update({ ...p, state: this.fold.state });
    this.catchUp();
  }

  private update(p: Partial<LiveSnapshot>): void {
    this.snap = { ...this.snap, ...p };
    for (const l of [...this.listeners]) l();
  }

  /** Starts the reads the state needs, each kind one at a time. */
  private catchUp(): void {
    if (this.closed) return;
    const s = this.fold.state;
    if (this.opts.fetchMissing !== false && st.missing(s).some((id) => !this.gone.has(id))) {
      this.once("missing", async () => {
        for (const id of this.fold.missing()) {
          if (this.gone.has(id)) continue;
          try {
            this.fold.hold(await this.client.message(this.conversationId, id));
          } catch (err) {
            if (!(err instanceof ParleyError && err.code === "not_found")) throw err;
            this.gone.add(id); // removed meanwhile: the stream brings its removal
          }
        }
      });
    }
    if (this.opts.queue !== false && !s.queue.known && s.position !== null) {
      this.once("queue", async () => {
        const q = await this.client.promptQueue(this.conversationId);
        // Not exact (prompts kept changing while it was read): read again
        // in a moment rather than show a queue that may be wrong.
        if (!q.exact) return new Promise<void>((done) => setTimeout(done, queueRetryMs));
        this.fold.withQueue(q.prompts, q.asOf);
      });
    }
    if (this.opts.view !== false && s.headStale) {
      this.once("view", async () => {
        this.fold.withView(await this.client.conversation(this.conversationId));
      });
    }
  }

  /**
   * Reads older messages: about a page of those before the first one held.
   * Resolves once they are held (or there are none); a read under way is
   * shared.
   */
  loadOlder(): Promise<void> {
    this.olderRead ??= this.readOlder().finally(() => (this.olderRead = undefined));
    return this.olderRead;
  }

  /** Reads older messages until the one at seq is held (or none is left). */
  async loadUntil(seq: number): Promise<void> {
    for (let i = 0; i < 1000; i++) {
      const first = this.fold.messages[0];
      if (!first || first.seq <= seq || this.snap.older.done || this.closed) return;
      this.span = Math.max(this.span, first.seq - seq + 1);
      await this.loadOlder();
    }
  }

  /** Reads message id whole (a summarized one, say when it is shown) and holds it in place of the summary. */
  async fetchMessage(id: string): Promise<void> {
    if (this.fetching.has(id)) return;
    this.fetching.add(id);
    try {
      this.fold.hold(await this.client.message(this.conversationId, id));
    } finally {
      this.fetching.delete(id);
    }
  }

  /**
   * Reads the messages in a span of seqs before the first one held (a
   * span that gives none is widened until one does, or the log's start),
   * and holds them, unless a snapshot came meanwhile.
   */
  private async readOlder(): Promise<void> {
    if (this.snap.older.done || this.closed) return;
    const first = this.fold.messages[0];
    if (!first) {
      this.update({ older: { loading: false, done: true } });
      return;
    }
    const gen = this.generation;
    this.update({ older: { loading: true, done: false } });
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
      if (gen === this.generation) this.update({ older: { loading: false, done: false } });
      throw err;
    }
    if (gen !== this.generation) return;
    this.hushed = true;
    try {
      this.fold.withOlder(got, this.removed);
    } finally {
      this.hushed = false;
    }
    this.changed({ older: { loading: false, done: from === 0 } });
  }

  private once(kind: string, read: () => Promise<void>): void {
    if (this.busy.has(kind)) return;
    this.busy.add(kind);
    read().then(
      () => {
        this.busy.delete(kind);
        this.catchUp(); // what changed meanwhile
      },
      (err: unknown) => {
        // Tried again at the next change of the state, not at once.
        this.busy.delete(kind);
        if (!this.closed) this.opts.onError?.(err);
      },
    );
  }
}

/** Follows a conversation live (see {@link LiveConversation}). */
export function follow(client: ParleyClient, conversationId: string, opts: FollowOptions = {}): LiveConversation {
  return new LiveConversation(client, conversationId, opts);
}
