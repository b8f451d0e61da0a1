import { memo } from "react";
import type { Conversation, Guidance, Head, StreamStatus } from "@parleyhq/client";
import { shortTime } from "../lib/format";

export interface HeadProps {
  conversation: Conversation | null;
  head: Head | null;
  guidance: Guidance | null;
  status: StreamStatus;
  stopped: string | null;
  /** The seq of the last event folded. */
  lastSeq: number;
}

function statusText(s: StreamStatus): { text: string; cls: string } {
  switch (s.state) {
    case "live":
      return { text: "live", cls: "ok" };
    case "connecting":
      return { text: s.attempt === 0 ? "connecting…" : "reconnecting…", cls: "warn" };
    case "waiting":
      return { text: `reconnecting in ${Math.ceil(s.delayMs / 1000)} s`, cls: "warn" };
    case "stopped":
      return { text: "stopped", cls: "bad" };
    case "closed":
      return { text: "closed", cls: "muted" };
  }
}

/** Whose turn it is, the open turn and its claim, what the guidance says, who takes part, and the connection. */
export const ConversationHead = memo(function ConversationHead(p: HeadProps) {
  const c = p.conversation;
  const h = p.head;
  const g = p.guidance;
  const st = statusText(p.status);
  let next: string;
  if (h?.closed) next = "The conversation is closed.";
  else if (!g) next = "…";
  else if (g.kind === "continue_turn") next = `${g.nextAgentId || "anyone"} continues turn ${g.turn}`;
  else next = g.nextAgentId ? `${g.nextAgentId} starts turn ${g.turn}` : `anyone may start turn ${g.turn}`;
  return (
    <section className="conv-head" aria-label="Conversation">
      <div className="conv-title-row">
        <h1 className="conv-title">{c?.title || c?.id || "…"}</h1>
        <span className={`conn conn-${st.cls}`} role="status" aria-label={`Connection: ${st.text}`}>
          {st.text}
        </span>
      </div>
      {p.stopped && (
        <div className="error-banner" role="alert">
          {p.stopped}
        </div>
      )}
      <dl className="facts">
        <div>
          <dt>Next</dt>
          <dd className="guidance">{next}</dd>
        </div>
        {h?.openTurn && (
          <div>
            <dt>Open turn</dt>
            <dd>
              {h.openTurn.turn} · {h.openTurn.owner}
              {h.openTurn.delegates?.length ? ` (delegated to ${h.openTurn.delegates.join(", ")})` : ""}
              {h.openTurn.reset ? " · reset" : ""}
            </dd>
          </div>
        )}
        {h?.claim && (
          <div>
            <dt>Claim</dt>
            <dd>
              {h.claim.agentId} claims turn {h.claim.turn}
              {h.claim.expiresAt ? ` until ${shortTime(h.claim.expiresAt)}` : ""}
            </dd>
          </div>
        )}
        {c && (
          <div>
            <dt>Participants</dt>
            <dd>
              {c.participants.join(", ") || "none"} <span className="muted">({c.turnPolicy})</span>
            </dd>
          </div>
        )}
        {c?.members && c.members.length > 0 && (
          <div>
            <dt>Members</dt>
            <dd>{c.members.join(", ")}</dd>
          </div>
        )}
        {h && (
          <div>
            <dt>Events</dt>
            <dd>
              {Math.max(p.lastSeq, h.lastSeq)} · turn {h.lastTurn}
            </dd>
          </div>
        )}
      </dl>
    </section>
  );
});
