import { memo } from "react";
import type { Conversation, Guidance, Head, PendingInput, StreamStatus } from "@parleyhq/client";
import { requestTitle } from "../lib/inputs";
import { shortTime } from "../lib/format";
import { runnersOf } from "../lib/presence";

export interface HeadProps {
  conversation: Conversation | null;
  head: Head | null;
  guidance: Guidance | null;
  status: StreamStatus;
  stopped: string | null;
  /** What the conversation waits on (waitingOn), null while not known. */
  waiting: string | null;
  /** The seq of the last event folded. */
  lastSeq: number;
  /** Shows a pending input request where it stands. */
  onJumpInput: (p: PendingInput) => void;
  /** Whether the head shows all its facts on a small screen (there it is one line until opened). */
  open: boolean;
  onToggleOpen: () => void;
}

const noPending: readonly PendingInput[] = [];

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

/** The input requests agents wait on, oldest first: each a button that shows it where it stands in its message. */
const PendingInputs = memo(function PendingInputs({ pending, onJump }: { pending: readonly PendingInput[]; onJump: (p: PendingInput) => void }) {
  if (pending.length === 0) return null;
  const n = pending.length;
  return (
    <nav className="pending-inputs" aria-label="Requests waiting for an answer">
      <strong className="pending-count" role="status">
        {n === 1 ? "1 request waits for an answer" : `${n} requests wait for an answer`}
      </strong>
      <ul>
        {pending.map((p) => (
          <li key={p.requestId}>
            <button type="button" className="linkish" onClick={() => onJump(p)}>
              <span className="pending-kind">{p.kind === "approval" ? "Approval" : "Question"}</span> from {p.agentId || "an agent"}: {requestTitle(p)}
            </button>
            {p.expiresAt && <span className="muted"> until {shortTime(p.expiresAt)}</span>}
          </li>
        ))}
      </ul>
    </nav>
  );
});

/** Whose turn it is, the open turn and its claim, what the guidance says, whose runners are connected, who takes part, the connection, and the input requests agents wait on. */
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
  const o = h?.openTurn;
  const openTurn = o
    ? `${o.turn} · ${o.owner}${o.delegates?.length ? ` (delegated to ${o.delegates.join(", ")})` : ""}${o.reset ? " · reset" : ""}`
    : "none";
  const runners = runnersOf(g);
  const connected = runners?.length ? runners.join(", ") : runners || h?.closed ? "none" : "…";
  const claim = h?.claim ? `${h.claim.agentId} claims turn ${h.claim.turn}${h.claim.expiresAt ? ` until ${shortTime(h.claim.expiresAt)}` : ""}` : "none";
  return (
    <section className={`conv-head${p.open ? " open" : ""}`} aria-label="Conversation">
      <div className="conv-title-row">
        <h1 className="conv-title">{c?.title || c?.id || "…"}</h1>
        <span className={`conn conn-${st.cls}`} role="status" aria-label={`Connection: ${st.text}`}>
          {st.text}
        </span>
      </div>
      {/* Only on a small screen (styles.css): the head is one line there until this opens it. */}
      <button type="button" className="icon-button head-more" aria-label="Details of the conversation" aria-expanded={p.open} onClick={p.onToggleOpen}>
        {p.open ? "▴" : "▾"}
      </button>
      {p.stopped && (
        <div className="error-banner" role="alert">
          {p.stopped}
        </div>
      )}
      {/* Every fact is always there, and those that change as the conversation goes are of a fixed
          width (cut short, whole in their title), so that nothing moves while answers stream. */}
      <dl className="facts">
        <div className="fact-slot fact-next">
          <dt>Next</dt>
          <dd className="guidance" title={next}>
            {next}
          </dd>
        </div>
        <div className="fact-slot fact-waits">
          <dt>Waits on</dt>
          <dd title={p.waiting ?? undefined} className={p.waiting?.startsWith("a person") ? "waits-person" : undefined}>
            {p.waiting ?? "…"}
          </dd>
        </div>
        <div className="fact-slot fact-turn">
          <dt>Open turn</dt>
          <dd title={openTurn}>{openTurn}</dd>
        </div>
        <div className="fact-slot fact-claim">
          <dt>Claim</dt>
          <dd title={claim}>{claim}</dd>
        </div>
        <div className="fact-slot fact-runners">
          <dt>Runners</dt>
          <dd title={runners?.length ? `Runners connected: ${connected}` : "No runner is connected: prompts wait until one connects"} className={runners?.length === 0 ? "no-runner" : undefined}>
            {connected}
          </dd>
        </div>
        <div className="fact-slot fact-events">
          <dt>Events</dt>
          <dd>{h ? `${Math.max(p.lastSeq, h.lastSeq)} · turn ${h.lastTurn}` : "…"}</dd>
        </div>
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
      </dl>
      <PendingInputs pending={h?.pendingInputs ?? noPending} onJump={p.onJumpInput} />
    </section>
  );
});
