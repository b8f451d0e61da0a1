import { memo } from "react";
import type { Guidance, QueuedPrompt } from "@parleyhq/client";
import { bytes, firstLine } from "../lib/format";
import { modeBadge, modeHelp } from "../lib/modes";
import { noRunnerFor, turnInTheWay } from "../lib/presence";

export interface QueuePanelProps {
  prompts: readonly QueuedPrompt[];
  known: boolean;
  /** The agents with a runner attached (presence), or null when not known. */
  runners: readonly string[] | null;
  /** The conversation's guidance: whose turn is open (what a waiting prompt may wait for). */
  guidance: Guidance | null;
  canChange: (p: QueuedPrompt) => boolean;
  onWithdraw: (id: string) => void;
  onPromote: (id: string) => void;
}

/** The prompt queue: the prompt being answered, then the waiting ones, each withdrawable and promotable. */
export const QueuePanel = memo(function QueuePanel(p: QueuePanelProps) {
  if (!p.known || p.prompts.length === 0) return null;
  const waiting = p.prompts.filter((x) => !x.runner);
  return (
    <section className="queue" aria-label="Prompt queue">
      <h2 className="queue-title">
        Queue <span className="count">{waiting.length} waiting</span>
      </h2>
      <ol>
        {p.prompts.map((q, i) => {
          const text = q.content !== undefined ? firstLine(q.content, 90) : `(${bytes(q.bytes ?? 0)})`;
          const answering = Boolean(q.runner);
          const noRunner = noRunnerFor(q, p.runners);
          const turn = noRunner ? null : turnInTheWay(p.prompts, i, p.guidance);
          return (
            <li key={q.id} className={answering ? "answering" : ""}>
              <span className={`badge badge-${q.mode}`} title={modeHelp(q.mode)}>
                {modeBadge(q.mode)}
              </span>
              <span className="queue-text" title={q.content}>
                {text}
              </span>
              <span className="queue-who">
                {q.agentId}
                {answering ? (q.aborted ? ` → ${q.runner} (stopping)` : ` → ${q.runner} answering`) : q.to ? ` → ${q.to}` : ""}
              </span>
              {noRunner && (
                <span className="queue-norunner" role="status">
                  {q.to ? `no runner of ${q.to} connected` : "no runner connected"}
                </span>
              )}
              {turn && (
                <span className="queue-norunner" role="status">
                  {turn}
                </span>
              )}
              {!answering && p.canChange(q) && (
                <span className="queue-actions">
                  {i > 0 && p.prompts[i - 1]?.runner === undefined && (
                    <button type="button" onClick={() => p.onPromote(q.id)} aria-label={`Move to the front: ${text}`}>
                      ↑ Front
                    </button>
                  )}
                  <button type="button" onClick={() => p.onWithdraw(q.id)} aria-label={`Withdraw: ${text}`}>
                    Withdraw
                  </button>
                </span>
              )}
            </li>
          );
        })}
      </ol>
    </section>
  );
});
