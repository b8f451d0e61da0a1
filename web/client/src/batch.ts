// Batching of what arrives faster than the screen is drawn: items pushed
// between two frames are handed over together, once, at the next frame.
// A stream of 1,000 text deltas a second then costs one fold-and-render per
// frame (60 a second), not one per delta.

/** Schedules a callback for the next frame; returns the function that cancels it. */
export type Schedule = (cb: () => void) => () => void;

/**
 * Collects items and hands them to `flush` together, at most once per
 * scheduled frame, in the order they were pushed. `schedule` defaults to
 * requestAnimationFrame (a timer where there is none, and in a hidden tab,
 * whose animation frames stop: what arrives while it is hidden is still
 * folded, four times a second).
 */
export class Batcher<T> {
  private items: T[] = [];
  private cancel: (() => void) | undefined;
  private closed = false;

  constructor(
    private readonly flush: (items: T[]) => void,
    private readonly schedule: Schedule = nextFrame,
  ) {}

  /** Adds an item; it is flushed at the next frame. */
  push(item: T): void {
    if (this.closed) return;
    this.items.push(item);
    this.cancel ??= this.schedule(() => {
      this.cancel = undefined;
      this.flushNow();
    });
  }

  /** How many items wait. */
  get pending(): number {
    return this.items.length;
  }

  /** Hands over what waits now (nothing if nothing does). */
  flushNow(): void {
    this.cancel?.();
    this.cancel = undefined;
    if (this.items.length === 0) return;
    const items = this.items;
    this.items = [];
    this.flush(items);
  }

  /** Drops what waits and takes no more. */
  close(): void {
    this.closed = true;
    this.items = [];
    this.cancel?.();
    this.cancel = undefined;
  }
}

/** The next animation frame, or a timer where there are none (Node, a hidden tab). */
export function nextFrame(cb: () => void): () => void {
  const g = globalThis as { requestAnimationFrame?: (cb: () => void) => number; cancelAnimationFrame?: (h: number) => void; document?: { hidden?: boolean } };
  if (g.requestAnimationFrame && g.document?.hidden !== true) {
    const h = g.requestAnimationFrame(cb);
    return () => g.cancelAnimationFrame?.(h);
  }
  const t = setTimeout(cb, g.document?.hidden === true ? 250 : 16);
  return () => clearTimeout(t);
}
