import { useVirtualizer } from "@tanstack/react-virtual";
import { memo, useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { ParleyClient, View } from "@parleyhq/client";
import { SearchResults } from "../components/SearchResults";
import { ago, errorText } from "../lib/format";
import { conversationPath, navigate } from "../lib/route";
import type { AuthState } from "../lib/auth";

/** One page of the list as read: the cursor it was read with, its views, and the cursor of the next. */
interface Page {
  cursor: string | undefined;
  views: View[];
  next: string | undefined;
}

const PAGE = 100;
const POLL_MS = 5000;

/**
 * The conversations, newest first, a page of 100 at a time as the reader
 * scrolls (cursor paging), virtualized. Live: the pages on screen are read
 * again every 5 s. Search by title asks the server for the titles that
 * contain what is typed (after a pause in typing), and pages through those
 * alike; search of messages shows the messages found in their stead.
 */
export function ConversationList({ auth }: { auth: AuthState }) {
  const [query, setQuery] = useState("");
  const [title, setTitle] = useState("");
  const [words, setWords] = useState("");
  const [found, setFound] = useState("");
  useEffect(() => {
    const t = setTimeout(() => setTitle(query.trim()), 250);
    return () => clearTimeout(t);
  }, [query]);
  useEffect(() => {
    const t = setTimeout(() => setFound(words.trim()), 300);
    return () => clearTimeout(t);
  }, [words]);
  return (
    <main className="list-page">
      <div className="list-top">
        <h1>{found ? "Messages found" : "Conversations"}</h1>
        <div className="list-search">
          <input type="search" className="search" aria-label="Search messages" placeholder="Search messages" value={words} maxLength={1024} onChange={(e) => setWords(e.target.value)} />
          <input type="search" className="search" aria-label="Search by title" placeholder="Search by title" value={query} maxLength={200} disabled={found !== ""} onChange={(e) => setQuery(e.target.value)} />
        </div>
      </div>
      {found ? <SearchResults key={found} client={auth.client} q={found} /> : <ListPages key={title} client={auth.client} title={title} />}
    </main>
  );
}

/** The pages of the list (of the titles that contain `title`, if given). */
function ListPages({ client, title }: { client: ParleyClient; title: string }) {
  const [pages, setPages] = useState<Page[]>([]);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const loadingRef = useRef(false);

  const loadMore = useCallback(async () => {
    if (loadingRef.current) return;
    const last = pages[pages.length - 1];
    if (last && !last.next) return;
    loadingRef.current = true;
    setLoading(true);
    try {
      const cursor = last?.next;
      const r = await client.listConversations({ cursor, limit: PAGE, title });
      setPages((ps) => (ps.length === pages.length ? [...ps, { cursor, views: r.conversations, next: r.nextCursor }] : ps));
      setError(null);
    } catch (err) {
      setError(errorText(err));
    } finally {
      loadingRef.current = false;
      setLoading(false);
    }
  }, [client, pages, title]);

  useEffect(() => {
    if (pages.length === 0) void loadMore();
  }, [pages.length, loadMore]);

  const shown = useMemo(() => pages.flatMap((p) => p.views), [pages]);
  const more = pages.length === 0 || pages[pages.length - 1]!.next !== undefined;

  const scroller = useRef<HTMLDivElement>(null);
  const v = useVirtualizer({
    count: shown.length,
    getScrollElement: () => scroller.current,
    estimateSize: () => 64,
    getItemKey: (i) => shown[i]?.conversation.id ?? i,
    overscan: 10,
  });
  const items = v.getVirtualItems();
  const lastIndex = items[items.length - 1]?.index ?? -1;
  useEffect(() => {
    if (more && !loading && !error && lastIndex >= shown.length - 20) void loadMore();
  }, [lastIndex, shown.length, more, loading, error, loadMore]);

  // Live: read again the pages that hold what is on screen.
  const visible = useRef<Set<string>>(new Set());
  useEffect(() => {
    visible.current = new Set(items.map((it) => String(it.key)));
  });
  const pagesRef = useRef(pages);
  useEffect(() => {
    pagesRef.current = pages;
  });
  useEffect(() => {
    const t = setInterval(() => {
      if (document.hidden) return;
      pagesRef.current.forEach((p, i) => {
        if (i === 0 || p.views.some((x) => visible.current.has(x.conversation.id))) void refresh(client, title, p, i, setPages);
      });
    }, POLL_MS);
    return () => clearInterval(t);
  }, [client, title]);

  const n = shown.length;
  return (
    <>
      <p className="muted list-note" aria-live="polite">
        {`${n}${more ? "+" : ""} ${n === 1 && !more ? "conversation" : "conversations"}${title ? ` whose title contains “${title}”` : ""}`}
      </p>
      {error && (
        <div className="error-banner" role="alert">
          {error}{" "}
          <button type="button" className="linkish" onClick={() => void loadMore()}>
            Try again
          </button>
        </div>
      )}
      <div className="conv-list" ref={scroller} role="list" aria-label="Conversations">
        <div className="conv-list-inner" style={{ height: v.getTotalSize() }}>
          {items.map((it) => {
            const view = shown[it.index]!;
            return (
              <div key={it.key} role="listitem" className="conv-row-wrap" data-index={it.index} ref={v.measureElement} style={{ transform: `translateY(${it.start}px)` }}>
                <ConversationRow view={view} client={client} />
              </div>
            );
          })}
        </div>
        {!loading && !more && n === 0 && <p className="muted empty">{title ? "No conversation has such a title." : "No conversations yet. Run `parley demo`, or create one through the API."}</p>}
        {loading && <p className="muted empty">Loading…</p>}
      </div>
    </>
  );
}

async function refresh(client: ParleyClient, title: string, p: Page, i: number, setPages: (f: (ps: Page[]) => Page[]) => void): Promise<void> {
  try {
    const r = await client.listConversations({ cursor: p.cursor, limit: PAGE, title });
    setPages((ps) => {
      if (ps[i]?.cursor !== p.cursor) return ps;
      const out = [...ps];
      // A new conversation at the top pushes the others down; the ones it
      // pushed past the page's end are in the next page when that is read.
      const seen = new Set(r.conversations.map((x) => x.conversation.id));
      out[i] = { cursor: p.cursor, views: r.conversations, next: ps[i]!.next === undefined ? r.nextCursor : ps[i]!.next };
      for (let j = i + 1; j < out.length; j++) out[j] = { ...out[j]!, views: out[j]!.views.filter((x) => !seen.has(x.conversation.id)) };
      return out;
    });
  } catch {
    // the next poll tries again
  }
}

/**
 * When each conversation last changed, for data written before servers kept
 * `head.lastEventAt`: the time of its last event, read for the rows on
 * screen and kept by seq.
 */
const activity = new Map<string, string>();
const asking = new Set<string>();

function useLastActivity(client: ParleyClient, id: string, lastSeq: number, known: string | undefined): string | undefined {
  const key = id + "@" + lastSeq;
  const [, tick] = useState(0);
  useEffect(() => {
    if (known || activity.has(key) || asking.has(key) || lastSeq < 1) return;
    asking.add(key);
    const t = setTimeout(() => {
      client
        .events(id, { after: lastSeq - 1, limit: 1 })
        .then((p) => {
          const ts = p.events[0]?.ts;
          if (ts) activity.set(key, ts);
          tick((n) => n + 1);
        })
        .catch(() => {})
        .finally(() => asking.delete(key));
    }, 150); // rows scrolled past quickly are not read
    return () => {
      clearTimeout(t);
      asking.delete(key);
    };
  }, [client, id, lastSeq, key, known]);
  return known ?? activity.get(key);
}

const ConversationRow = memo(function ConversationRow({ view, client }: { view: View; client: ParleyClient }) {
  const c = view.conversation;
  const g = view.guidance;
  const last = useLastActivity(client, c.id, view.head.lastSeq, view.head.lastEventAt);
  const href = conversationPath(c.id);
  const waiting = view.head.pendingInputs?.length ?? 0;
  const whose = view.head.closed ? "closed" : !g ? "" : g.nextAgentId ? `${g.kind === "continue_turn" ? "continuing" : "next"}: ${g.nextAgentId}` : "anyone may start";
  return (
    <a
      className="conv-row"
      href={href}
      onClick={(e) => {
        if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(href);
      }}
    >
      <span className="conv-row-title">{c.title || c.id}</span>
      <span className="conv-row-meta">
        <span className="conv-row-who">{[...c.participants, ...(c.members ?? [])].join(", ") || "no participants"}</span>
        <span className="conv-row-turn">{whose}</span>
        {waiting > 0 && <span className="conv-row-waiting">{waiting === 1 ? "1 request waits for an answer" : `${waiting} requests wait for an answer`}</span>}
        <span className="conv-row-when" title={last ?? undefined}>
          {last ? ago(last) : `${view.head.lastSeq} events`}
        </span>
      </span>
    </a>
  );
});
