// Small classes around the pure folds: ConversationFold holds a state and
// tells listeners when it changes (React's useSyncExternalStore takes its
// subscribe and getSnapshot as they are); LiveConversation also follows the
// stream and reads over HTTP what the stream leaves out.

import type { ParleyClient } from "./client.js";
import { ParleyError } from "./errors.js";
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
}

/** What a followed conversation shows: its state and its connection's. */
export interface LiveSnapshot {
  readonly state: ConversationState;
  readonly status: StreamStatus;
}

/**
 * A conversation followed live: the stream folded into its state, with
 * what the stream leaves out read over HTTP: the messages a snapshot
 * summarized, the prompt queue after a snapshot, and the view (head and
 * guidance) when events may have changed the head. Reads are one at a time
 * of each kind, so a burst of events costs one read.
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
  private closed = false;
  /** Resolves when the stream has ended (closed, or stopped for good). */
  readonly done: Promise<void>;

  constructor(
    private readonly client: ParleyClient,
    readonly conversationId: string,
    private readonly opts: FollowOptions = {},
  ) {
    this.snap = { state: this.fold.state, status: { state: "connecting", attempt: 0 } };
    this.subscription = client.subscribe(conversationId, {
      ...opts,
      onStatus: (s) => {
        this.update({ status: s });
        opts.onStatus?.(s);
      },
    });
    this.fold.subscribe(() => {
      this.update({ state: this.fold.state });
      this.catchUp();
    });
    this.done = this.run();
  }

  /** The state and the connection's status: a new object whenever either changed. */
  getSnapshot = (): LiveSnapshot => this.snap;

  /** Calls listener after every change; returns the function that stops it. */
  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  /** Stops following. */
  close(): void {
    this.closed = true;
    this.subscription.close();
  }

  private async run(): Promise<void> {
    try {
      for await (const frame of this.subscription) {
        try {
          this.fold.apply(frame);
        } catch (err) {
          this.opts.onError?.(err); // an event whose data is not what its type says
        }
      }
    } catch (err) {
      if (!(err instanceof ParleyError)) this.opts.onError?.(err);
    }
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
