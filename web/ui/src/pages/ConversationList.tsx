import { useVirtualizer } from "@tanstack/react-virtual";
import { memo, useCallback, useEffect, useMemo, useRef, useState } from "react";
import type { ListConversationsOptions, ParleyClient, View } from "@parleyhq/client";
import { SearchResults } from "../components/SearchResults";
import { ago, errorText } from "../lib/format";
import { MAX_METADATA_FILTERS, conversationPath, listQuery, navigate, parseListFilters, useLocation } from "../lib/route";
import { writerId, type AuthState } from "../lib/auth";

/** One page of the list as read: the cursor it was read with, its views, and the cursor of the next. */
interface Page {
  cursor: string | undefined;
  views: View[];
  next: string | undefined;
}

/** What the server is asked to keep: the list's filters as `listConversations` takes them. */
type Filters = Omit<ListConversationsOptions, "cursor" | "limit">;

const PAGE = 100;
const POLL_MS = 5000;

/** The agent the "Mine" filter is about: the person the page writes as, or a token's agent. */
function meOf(auth: AuthState): string | undefined {
  return writerId(auth) ?? (auth.identity.kind === "agent" ? auth.identity.agentId : undefined);
}

/** The metadata filter as typed ("key=value", several separated by commas), or why it is not one. */
function parseMetadata(text: string): { pairs: [string, string][]; error?: string } {
  const pairs: [string, string][] = [];
  for (const part of text.split(",")) {
    const t = part.trim();
    if (!t) continue;
    const eq = t.indexOf("=");
    if (eq <= 0) return { pairs: [], error: `“${t}” is not key=value` };
    pairs.push([t.slice(0, eq).trim(), t.slice(eq + 1).trim()]);
  }
  if (pairs.length > MAX_METADATA_FILTERS) return { pairs: [], error: `at most ${MAX_METADATA_FILTERS} key=value pairs` };
  return { pairs };
}

/**
 * The conversations, most recently active first (as the server orders
 * them), a page of 100 at a time as the reader scrolls (cursor paging),
 * virtualized. Live: the pages on screen are read again every 5 s, so a
 * conversation with new activity moves to the top. The filters (title,
 * "Mine", a participant, metadata key=value) are the server's, kept in the
 * URL's query so that a reload or a shared link keeps them; typing applies
 * them after a pause. Search of messages shows the messages found instead.
 */
export function ConversationList({ auth }: { auth: AuthState }) {
  const loc = useLocation();
  const applied = parseListFilters(loc.search);
  const [query, setQuery] = useState(applied.title);
  const [mine, setMine] = useState(applied.mine);
  const [participant, setParticipant] = useState(applied.participant);
  const [metaText, setMetaText] = useState(applied.metadata.map(([k, v]) => `${k}=${v}`).join(", "));
  const [words, setWords] = useState("");
  const [found, setFound] = useState("");
  const meta = parseMetadata(metaText);
  const me = meOf(auth);
  useEffect(() => {
    const t = setTimeout(() => {
      const next = listQuery({ title: query.trim(), mine, participant: participant.trim(), metadata: meta.error ? applied.metadata : meta.pairs });
      if (next !== location.search) navigate(location.pathname + next, { replace: true });
    }, 250);
    return () => clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps -- meta and applied follow metaText and the URL
  }, [query, mine, participant, metaText]);
  useEffect(() => {
    const t = setTimeout(() => setFound(words.trim()), 300);
    return () => clearTimeout(t);
  }, [words]);
  const filters: Filters = {
    title: applied.title || undefined,
    involves: applied.mine && me ? me : undefined,
    participant: applied.participant || undefined,
    metadata: applied.metadata.length ? Object.fromEntries(applied.metadata) : undefined,
  };
  const filtered = query !== "" || mine || participant !== "" || metaText !== "";
  const clear = () => {
    setQuery("");
    setMine(false);
    setParticipant("");
    setMetaText("");
  };
  return (
    <main className="list-page">
      <div className="list-top">
        <h1>{found ? "Messages found" : "Conversations"}</h1>
        <div className="list-search">
          <input type="search" className="search" aria-label="Search messages" placeholder="Search messages" value={words} maxLength={1024} onChange={(e) => setWords(e.target.value)} />
          <input type="search" className="search" aria-label="Search by title" placeholder="Search by title" value={query} maxLength={200} disabled={found !== ""} onChange={(e) => setQuery(e.target.value)} />
        </div>
      </div>
      {!found && (
        <div className="list-filters" role="group" aria-label="Filter conversations">
          <button
            type="button"
            className="filter-mine"
            aria-pressed={mine}
            disabled={!me}
            title={me ? `Only the conversations ${me} takes part in` : "A viewer's token writes as no one: there is nothing of its own to show"}
            onClick={() => setMine((m) => !m)}
          >
            Mine{me ? ` (${me})` : ""}
          </button>
          <label className="filter-field">
            <span>Participant</span>
            <input type="text" placeholder="agent id" value={participant} maxLength={512} autoComplete="off" spellCheck={false} onChange={(e) => setParticipant(e.target.value)} />
          </label>
          <label className="filter-field">
            <span>Metadata</span>
            <input
              type="text"
              placeholder="key=value"
              value={metaText}
              maxLength={2600}
              autoComplete="off"
              spellCheck={false}
              aria-invalid={meta.error ? true : undefined}
              aria-describedby={meta.error ? "filter-meta-error" : undefined}
              onChange={(e) => setMetaText(e.target.value)}
            />
          </label>
          {filtered && (
            <button type="button" className="linkish filter-clear" onClick={clear}>
              Clear filters
            </button>
          )}
          {meta.error && (
            <p id="filter-meta-error" className="filter-error" role="alert">
              Metadata: {meta.error}
            </p>
          )}
        </div>
      )}
      {found ? <SearchResults key={found} client={auth.client} q={found} /> : <ListPages key={JSON.stringify(filters)} client={auth.client} filters={filters} />}
    </main>
  );
}

/** What the list's filters keep, in words, for the note above it. */
function describe(f: Filters): string {
  const parts: string[] = [];
  if (f.title) parts.push(`whose title contains “${f.title}”`);
  if (f.involves) parts.push(`involving ${f.involves}`);
  if (f.participant) parts.push(`with participant ${f.participant}`);
  for (const [k, v] of Object.entries(f.metadata ?? {})) parts.push(`with ${k}=${v}`);
  return parts.length ? " " + parts.join(", ") : "";
}

/** The pages of the list that the filters keep. */
function ListPages({ client, filters }: { client: ParleyClient; filters: Filters }) {
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
      const r = await client.listConversations({ ...filters, cursor, limit: PAGE });
      setPages((ps) => (ps.length === pages.length ? [...ps, { cursor, views: r.conversations, next: r.nextCursor }] : ps));
      setError(null);
    } catch (err) {
      setError(errorText(err));
    } finally {
      loadingRef.current = false;
      setLoading(false);
    }
  }, [client, pages, filters]);

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
  const filtersRef = useRef(filters);
  useEffect(() => {
    pagesRef.current = pages;
    filtersRef.current = filters;
  });
  useEffect(() => {
    const t = setInterval(() => {
      if (document.hidden) return;
      pagesRef.current.forEach((p, i) => {
        if (i === 0 || p.views.some((x) => visible.current.has(x.conversation.id))) void refresh(client, filtersRef.current, p, i, setPages);
      });
    }, POLL_MS);
    return () => clearInterval(t);
  }, [client]);

  const n = shown.length;
  return (
    <>
      <p className="muted list-note" aria-live="polite">
        {`${n}${more ? "+" : ""} ${n === 1 && !more ? "conversation" : "conversations"}${describe(filters)}`}
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
        {!loading && !more && n === 0 && <p className="muted empty">{filters.title && Object.keys(filters).filter((k) => filters[k as keyof Filters]).length === 1
              ? "No conversation has such a title."
              : describe(filters)
                ? "No conversation matches these filters."
                : "No conversations yet. Run `parley demo`, or create one through the API."}</p>}
        {loading && <p className="muted empty">Loading…</p>}
      </div>
    </>
  );
}

async function refresh(client: ParleyClient, filters: Filters, p: Page, i: number, setPages: (f: (ps: Page[]) => Page[]) => void): Promise<void> {
  try {
    const r = await client.listConversations({ ...filters, cursor: p.cursor, limit: PAGE });
    setPages((ps) => {
      if (ps[i]?.cursor !== p.cursor) return ps;
      const out = [...ps];
      // A conversation new or newly active at the top pushes the others
      // down (and leaves the later page it was in); the ones pushed past
      // the page's end are in the next page when that is read.
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
  const pending = view.head.pendingInputs ?? [];
  const waiting = pending.length;
  const askers = [...new Set(pending.map((p) => p.agentId))].join(", ");
  const open = view.head.openTurn;
  const claim = view.head.claim;
  // What is live: a turn open (an answer on its way), whose; else a claim on the next.
  const live = view.head.closed ? "" : open ? `turn open: ${open.owner}` : claim ? `claimed by ${claim.agentId}` : "";
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
        {live && <span className="conv-row-live">{live}</span>}
        <span className="conv-row-turn">{whose}</span>
        {waiting > 0 && (
          <span className="conv-row-waiting" title={pending.map((p) => `${p.agentId}: ${p.title ?? p.kind}`).join("\n")}>
            {waiting === 1 ? "1 request waits for an answer" : `${waiting} requests wait for an answer`}
          </span>
        )}
        {waiting > 0 && askers && <span className="conv-row-askers">asked by {askers}</span>}
        <span className="conv-row-when" title={last ?? undefined}>
          {last ? ago(last) : `${view.head.lastSeq} events`}
        </span>
      </span>
    </a>
  );
});
