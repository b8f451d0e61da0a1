import { useEffect, useState } from "react";
import type { ParleyClient } from "@parleyhq/client";
import { SearchResults } from "./SearchResults";

/**
 * Search of one conversation's messages, in its page: what is typed is
 * searched for after a pause, and a message found is shown in the
 * conversation (`onJump`), which closes the results.
 */
export function ConversationSearch({ client, id, onJump }: { client: ParleyClient; id: string; onJump: (messageId: string) => void }) {
  const [words, setWords] = useState("");
  const [found, setFound] = useState("");
  useEffect(() => {
    const t = setTimeout(() => setFound(words.trim()), 300);
    return () => clearTimeout(t);
  }, [words]);
  return (
    <div className="conv-search">
      <input
        type="search"
        className="search"
        aria-label="Search this conversation"
        placeholder="Search this conversation"
        value={words}
        maxLength={1024}
        onChange={(e) => setWords(e.target.value)}
      />
      {found && (
        <section className="conv-search-results" aria-label="Messages found in this conversation">
          <SearchResults
            key={found}
            client={client}
            q={found}
            conversationId={id}
            onOpen={(h) => {
              setWords("");
              setFound("");
              onJump(h.messageId);
            }}
          />
        </section>
      )}
    </div>
  );
}
