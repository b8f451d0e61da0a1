// A conversation followed live for the page: the client's LiveConversation
// (its stream folded one batch per animation frame; the prompt queue and
// the head read when the stream leaves them out; a summarized message read
// when it is shown, older messages as the reader scrolls up), and beside it
// a window of the log's events for the flow picture.

import { follow, nextFrame, type ConversationState, type Frame, type LiveConversation, type ParleyClient, type ParleyEvent, type Schedule } from "@parleyhq/client";
import { isFlowEvent, mergeEvents } from "./flow";

/** The events the flow picture is drawn from: every event after `after` that moves the conversation on. */
export interface FlowEvents {
  readonly events: readonly ParleyEvent[];
  /** The window starts after this seq (0: at the log's start). */
  readonly after: number;
  readonly loading: boolean;
}

/** How far back the flow picture reads the log when it opens, and how much it keeps. */
export const FLOW_WINDOW = 4000;
const FLOW_KEEP = 5000;

/** Whether the flow picture keeps an event (and the page's dispatch map reads it). */
export function keepForFlow(e: ParleyEvent): boolean {
  return isFlowEvent(e) || e.type === "prompt.dispatched";
}

/** Options of {@link followPage}. */
export interface LiveOptions {
  onError?: (err: unknown) => void;
  /** When to fold what arrived (default: the next animation frame). */
  schedule?: Schedule;
  /** Read the flow's window of the log (default true). */
  flow?: boolean;
}

/** What the page follows of a conversation. */
export interface Followed {
  /** The conversation: its state, its connection's, its older messages'. */
  readonly live: LiveConversation;
  /** The flow picture's window of the log. */
  readonly flow: FlowWindow;
  /** Stops following. */
  close(): void;
}

/** Follows a conversation for the page: see the file's comment. */
export function followPage(client: ParleyClient, conversationId: string, opts: LiveOptions = {}): Followed {
  const flow = new FlowWindow(client, conversationId, { onError: opts.onError, read: opts.flow !== false });
  const live = follow(client, conversationId, {
    fetchMissing: false, // a summarized message is read when it is shown
    schedule: opts.schedule ?? nextFrame,
    onError: opts.onError,
    onFrames: (frames, state) => flow.add(frames, state),
  });
  return {
    live,
    flow,
    close() {
      flow.close();
      live.close();
    },
  };
}

/**
 * The flow picture's window of the log: at a snapshot, the events of the
 * last {@link FLOW_WINDOW} seqs read over HTTP (earlier ones when asked),
 * and after them the events the stream brings, at most FLOW_KEEP of them.
 */
export class FlowWindow {
  private snap: FlowEvents = { events: [], after: 0, loading: false };
  private readonly listeners = new Set<() => void>();
  private closed = false;
  /** Counts snapshots: a read started before the latest one is dropped. */
  private generation = 0;

  constructor(
    private readonly client: ParleyClient,
    readonly conversationId: string,
    private readonly opts: { onError?: (err: unknown) => void; read: boolean },
  ) {}

  getSnapshot = (): FlowEvents => this.snap;

  subscribe = (listener: () => void): (() => void) => {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  };

  close(): void {
    this.closed = true;
  }

  private set(flow: FlowEvents): void {
    if (this.closed || flow === this.snap) return;
    this.snap = flow;
    for (const l of [...this.listeners]) l();
  }

  /** Takes the frames the conversation just folded, and its state after them. */
  add(frames: readonly Frame[], state: ConversationState): void {
    let flow = this.snap;
    const live: ParleyEvent[] = [];
    let reload = false;
    for (const f of frames) {
      if (f.type === "init" && !f.init.recovered) {
        // A snapshot: everything held before is dropped.
        this.generation++;
        live.length = 0;
        flow = { events: [], after: Math.max(0, f.init.position.seq - FLOW_WINDOW), loading: this.opts.read };
        reload = this.opts.read;
      } else if (f.type === "event" && keepForFlow(f.event)) {
        live.push(f.event);
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
    this.set(flow);
    if (reload && state.position) void this.readFlow(flow.after, state.position.seq, this.generation);
  }

  /** Reads the log's events after `after` up to `until` for the flow picture. */
  private async readFlow(after: number, until: number, gen: number): Promise<void> {
    const got: ParleyEvent[] = [];
    try {
      await this.readInto(got, after, until);
    } catch (err) {
      if (!this.closed) this.opts.onError?.(err);
    }
    if (gen !== this.generation) return;
    const flow = this.snap;
    this.set({ ...flow, events: mergeEvents(got, flow.events), loading: false });
  }

  /** Reads the flow's events before its window (another {@link FLOW_WINDOW} seqs). */
  async loadEarlier(): Promise<void> {
    const flow = this.snap;
    if (flow.after === 0 || flow.loading) return;
    const gen = this.generation;
    const from = Math.max(0, flow.after - FLOW_WINDOW);
    this.set({ ...flow, loading: true });
    const got: ParleyEvent[] = [];
    try {
      await this.readInto(got, from, flow.after);
    } catch (err) {
      this.opts.onError?.(err);
      if (gen === this.generation) this.set({ ...this.snap, loading: false });
      return;
    }
    if (gen !== this.generation) return;
    const now = this.snap;
    this.set({ events: mergeEvents(got, now.events), after: from, loading: false });
  }

  /** Reads the events after `after` up to `until` that the flow keeps into got, page by page. */
  private async readInto(got: ParleyEvent[], after: number, until: number): Promise<void> {
    let at = after;
    while (at < until) {
      const page = await this.client.events(this.conversationId, { after: at, limit: 1000 });
      for (const e of page.events) if (e.seq <= until && keepForFlow(e)) got.push(e);
      const last = page.events[page.events.length - 1];
      if (page.nextAfter === undefined || last === undefined) break;
      at = last.seq;
    }
  }
}
