import { useCallback, useEffect, useRef, useState } from "react";
import type { ParleyClient, SearchHit, SnippetPart } from "@parleyhq/client";
import { ago, errorText, shortTime } from "../lib/format";
import { conversationPath, navigate } from "../lib/route";

const PAGE = 20;

/** Where a hit opens: its conversation's page at the message. */
export function hitPath(h: SearchHit): string {
  return conversationPath(h.conversationId) + "?m=" + encodeURIComponent(h.messageId);
}

/**
 * The messages whose text has `q` (in the conversation `conversationId`, if
 * given), best first, each with its snippet, the words found marked; 20 at a
 * time, more on asking. A hit opens its conversation at the message.
 */
export function SearchResults({ client, q, conversationId, onOpen }: { client: ParleyClient; q: string; conversationId?: string; onOpen?: (h: SearchHit) => void }) {
  const [hits, setHits] = useState<SearchHit[]>([]);
  const [next, setNext] = useState<string | undefined>(undefined);
  const [loaded, setLoaded] = useState(false);
  const [loading, setLoading] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const [attempt, setAttempt] = useState(0);
  const busy = useRef(false);

  // The first page, read again on "Try again".
  useEffect(() => {
    let current = true;
    client.search({ q, conversationId, limit: PAGE }).then(
      (page) => {
        if (!current) return;
        setHits(page.hits);
        setNext(page.nextCursor);
        setLoaded(true);
        setError(null);
      },
      (err: unknown) => {
        if (current) setError(errorText(err));
      },
    );
    return () => {
      current = false;
    };
  }, [client, q, conversationId, attempt]);

  const more = useCallback(async () => {
    if (busy.current || !next) return;
    busy.current = true;
    setLoading(true);
    try {
      const page = await client.search({ q, conversationId, limit: PAGE, cursor: next });
      setHits((hs) => [...hs, ...page.hits]);
      setNext(page.nextCursor);
      setError(null);
    } catch (err) {
      setError(errorText(err));
    } finally {
      busy.current = false;
      setLoading(false);
    }
  }, [client, q, conversationId, next]);

  const n = hits.length;
  return (
    <div className="search-results">
      <p className="muted list-note" aria-live="polite">
        {!loaded ? (error ? "" : "Searching…") : n === 0 ? "No message has these words." : `${n}${next ? "+" : ""} ${n === 1 && !next ? "message" : "messages"} found`}
      </p>
      {error && (
        <div className="error-banner" role="alert">
          {error}{" "}
          <button type="button" className="linkish" onClick={() => (loaded ? void more() : setAttempt((a) => a + 1))}>
            Try again
          </button>
        </div>
      )}
      <ol className="hits" aria-label="Messages found">
        {hits.map((h) => (
          <li key={h.conversationId + "\u0000" + h.messageId}>
            <a
              className="hit"
              href={hitPath(h)}
              onClick={(e) => {
                if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
                e.preventDefault();
                if (onOpen) onOpen(h);
                else navigate(hitPath(h));
              }}
            >
              <span className="hit-meta">
                {!conversationId && <span className="hit-where">{h.conversationTitle || h.conversationId}</span>}
                <span className="hit-who">{h.agentId}</span>
                <span className="hit-when" title={shortTime(h.createdAt)}>
                  {ago(h.createdAt)}
                </span>
              </span>
              <Snippet parts={h.snippet} />
            </a>
          </li>
        ))}
      </ol>
      {next && (
        <button type="button" className="more-hits" disabled={loading} onClick={() => void more()}>
          {loading ? "Loading…" : "More results"}
        </button>
      )}
    </div>
  );
}

/** A snippet as text, the words found in <mark>: its pieces are never read as HTML. */
export function Snippet({ parts }: { parts: readonly SnippetPart[] }) {
  return (
    <span className="hit-snippet">
      {parts.map((p, i) => (p.match ? <mark key={i}>{p.text}</mark> : <span key={i}>{p.text}</span>))}
    </span>
  );
}
