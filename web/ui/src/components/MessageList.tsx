import { useVirtualizer } from "@tanstack/react-virtual";
import { memo, useCallback, useEffect, useImperativeHandle, useLayoutEffect, useRef, type Ref } from "react";
import type { Message } from "@parleyhq/client";
import { firstLine } from "../lib/format";
import type { ExchangeRow, Row, TurnRow } from "../lib/turns";
import type { AnswerInput } from "./InputCard";
import { MessageView } from "./MessageView";

/** What the page can ask of the list. */
export interface MessageListHandle {
  /** Scrolls to a row and moves the keyboard's focus to its message (or to the input request of it named). */
  scrollToRow(index: number, requestId?: string): void;
}

export interface MessageListProps {
  rows: readonly Row[];
  noReply: ReadonlySet<string>;
  retried: ReadonlySet<string>;
  replies: ReadonlyMap<string, Message[]>;
  authors: ReadonlyMap<string, string>;
  highlighted: string | null;
  canRevert: boolean;
  /** Whether the page may write a reply to a message. */
  canReply: boolean;
  /** Whether the page's identity may answer input requests at all. */
  canAnswer: boolean;
  /** The agent the page's identity writes as, if it is one (it cannot answer its own requests). */
  me: string | undefined;
  onAnswer: AnswerInput;
  olderLoading: boolean;
  olderDone: boolean;
  onLoadOlder: () => void;
  onToggle: (turnId: string) => void;
  onJump: (id: string) => void;
  onRevert: (m: Message) => void;
  onReply: (m: Message) => void;
  onFetch: (id: string) => void;
  ref?: Ref<MessageListHandle>;
}

function estimate(r: Row | undefined): number {
  if (!r) return 80;
  if (r.kind === "exchange") return 40;
  if (r.kind === "turn") return 28;
  const m = r.message;
  return 64 + Math.min(600, Math.ceil(m.content.length / 90) * 22) + m.parts.filter((p) => p.type === "tool-call").length * 40 + m.parts.filter((p) => p.type === "input-request").length * 180;
}

/**
 * The messages, virtualized: only the rows on screen (and a few around)
 * are in the page. It stays at the bottom while new text arrives if the
 * reader is there, keeps what the reader looks at in place when older
 * messages are put above, and asks for older ones near the top.
 */
export function MessageList(p: MessageListProps) {
  const scroller = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  const anchor = useRef<{ key: string; offset: number } | null>(null);
  const quietUntil = useRef(0);
  const checkRef = useRef<() => void>(() => {});
  const { rows } = p;
  const rowsRef = useRef(rows);
  useEffect(() => {
    rowsRef.current = rows;
  }, [rows]);
  const v = useVirtualizer({
    count: rows.length,
    getScrollElement: () => scroller.current,
    estimateSize: (i) => estimate(rows[i]),
    getItemKey: (i) => rows[i]?.key ?? i,
    overscan: 8,
    onChange: (inst) => {
      const el = scroller.current;
      if (el && stick.current && !inst.isScrolling) el.scrollTop = el.scrollHeight;
    },
  });

  useImperativeHandle(
    p.ref,
    () => ({
      scrollToRow(index: number, requestId?: string) {
        stick.current = false;
        quietUntil.current = performance.now() + 1500; // no older page may push it away meanwhile
        setTimeout(() => checkRef.current(), 1600);
        // Scrolled directly (not with the virtualizer's scrollToIndex, which
        // keeps aiming at an index that older rows put above would shift).
        // The rows around were estimated: once they are measured, aim again.
        let n = 0;
        const aim = () => {
          const el = scroller.current;
          const at = v.getOffsetForIndex(index, "center");
          if (el && at) el.scrollTop = at[0];
          if (++n < 4) requestAnimationFrame(aim);
          else {
            const row = el?.querySelector<HTMLElement>(`[data-index="${index}"]`);
            const card = requestId ? row?.querySelector<HTMLElement>(`[data-request-id="${CSS.escape(requestId)}"]`) : null;
            if (card) {
              card.scrollIntoView({ block: "start" });
              card.focus({ preventScroll: true });
            } else row?.querySelector<HTMLElement>("article")?.focus({ preventScroll: true });
          }
        };
        aim();
      },
    }),
    [v],
  );

  // Before rows are put above what is on screen, remember the first row seen and where.
  const firstKey = rows[0]?.key;
  const prevFirst = useRef(firstKey);
  useLayoutEffect(() => {
    const el = scroller.current;
    if (!el) return;
    if (prevFirst.current !== firstKey && anchor.current && !stick.current) {
      const i = rows.findIndex((r) => r.key === anchor.current!.key);
      if (i >= 0) {
        const at = v.getOffsetForIndex(i, "start");
        if (at) {
          el.scrollTop = at[0] + anchor.current.offset;
        }
      }
    }
    prevFirst.current = firstKey;
    if (stick.current) el.scrollTop = el.scrollHeight;
  });

  const { onLoadOlder, olderLoading, olderDone } = p;
  const onScroll = useCallback(() => {
    const el = scroller.current;
    if (!el) return;
    stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 48;
    const items = v.getVirtualItems();
    // The anchor is a message (its key is its id): a header's key changes when older messages join its run.
    const first = items.find((it) => it.end > el.scrollTop && rowsRef.current[it.index]?.kind === "message");
    if (first) anchor.current = { key: String(first.key), offset: el.scrollTop - first.start };
    if (el.scrollTop < 600 && !olderLoading && !olderDone && performance.now() > quietUntil.current) onLoadOlder();
  }, [v, onLoadOlder, olderLoading, olderDone]);
  useEffect(() => {
    checkRef.current = onScroll;
  }, [onScroll]);

  // Once a read of older messages ends and more are left, look at where the
  // reader is again: one who stays near the top (a page that put little
  // above, or a read dropped by a new snapshot, or failed) sends no scroll
  // event to ask for the next. After a moment, so that a failing read is
  // not asked for again at once.
  useEffect(() => {
    if (olderLoading || olderDone) return;
    const t = setTimeout(() => {
      const el = scroller.current;
      if (el && el.scrollTop < 600 && performance.now() > quietUntil.current) onLoadOlder();
    }, 500);
    return () => clearTimeout(t);
  }, [olderLoading, olderDone, firstKey, onLoadOlder]);

  // A short conversation has no scroll bar: read older messages at once.
  useEffect(() => {
    const el = scroller.current;
    if (el && el.scrollHeight <= el.clientHeight + 600 && !olderLoading && !olderDone && rows.length > 0) onLoadOlder();
  }, [rows.length, olderLoading, olderDone, onLoadOlder]);

  const items = v.getVirtualItems();
  return (
    <div className="messages" ref={scroller} onScroll={onScroll} role="log" aria-label="Messages" aria-live="off" aria-busy={olderLoading} tabIndex={0}>
      <div className="older-note" aria-live="polite">
        {olderLoading ? "Loading older messages…" : olderDone ? (rows.length ? "The conversation starts here." : "No messages yet.") : ""}
      </div>
      <div className="messages-inner" style={{ height: v.getTotalSize() }}>
        {items.map((it) => {
          const r = rows[it.index]!;
          return (
            <div key={it.key} data-index={it.index} ref={v.measureElement} className="row" style={{ transform: `translateY(${it.start}px)` }}>
              {r.kind === "exchange" ? (
                <ExchangeHeader row={r} onToggle={p.onToggle} />
              ) : r.kind === "turn" ? (
                <TurnHeader row={r} />
              ) : (
                <MessageView
                  message={r.message}
                  nested={r.nested}
                  owner={r.owner}
                  noReply={p.noReply.has(r.message.id)}
                  retried={p.retried.has(r.message.id)}
                  parentAuthor={r.message.replyTo ? p.authors.get(r.message.replyTo) : undefined}
                  replyIds={p.replies.get(r.message.id)?.map((x) => x.id + " " + x.agentId).join("\n") ?? ""}
                  retryAuthor={r.message.retryOf ? p.authors.get(r.message.retryOf) : undefined}
                  highlighted={p.highlighted === r.message.id}
                  canRevert={p.canRevert}
                  canReply={p.canReply}
                  canAnswer={p.canAnswer && p.me !== r.message.agentId}
                  onAnswer={p.onAnswer}
                  onJump={p.onJump}
                  onRevert={p.onRevert}
                  onReply={p.onReply}
                  onFetch={p.onFetch}
                />
              )}
            </div>
          );
        })}
      </div>
    </div>
  );
}

const ExchangeHeader = memo(function ExchangeHeader({ row, onToggle }: { row: ExchangeRow; onToggle: (turnId: string) => void }) {
  const first = row.first;
  const what = first.role === "user" ? firstLine(first.content, 70) : `${first.agentId}`;
  return (
    <div className="exchange">
      <button
        type="button"
        className="exchange-toggle"
        aria-expanded={!row.collapsed}
        aria-label={`Exchange${what ? `: ${what}` : ""}, ${row.count} ${row.count === 1 ? "message" : "messages"}`}
        onClick={() => onToggle(row.turnId)}
      >
        <span aria-hidden="true">{row.collapsed ? "▸" : "▾"}</span>
        <span className="exchange-what">Exchange{what ? `: ${what}` : ""}</span>
        <span className="count">
          {row.count} {row.count === 1 ? "message" : "messages"}
        </span>
      </button>
    </div>
  );
});

const TurnHeader = memo(function TurnHeader({ row }: { row: TurnRow }) {
  return (
    <div className="turn-head">
      {row.turn === 0 ? "Outside turns" : `Turn ${row.turn} · ${row.owner}`}
      {row.delegates.length > 0 && <span className="delegates"> · delegated to {row.delegates.join(", ")}</span>}
    </div>
  );
});
