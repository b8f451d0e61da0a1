import { memo, useEffect } from "react";
import type { Message } from "@parleyhq/client";
import { bytes, shortTime } from "../lib/format";
import { NO_REPLY } from "../lib/noreply";
import { InputCard, type AnswerInput } from "./InputCard";
import { Markdown } from "./Markdown";
import { ToolCard } from "./ToolCard";

/** What a message row needs besides the message: primitives and stable callbacks, so that memo holds. */
export interface MessageProps {
  message: Message;
  nested: boolean;
  owner: string;
  noReply: boolean;
  retried: boolean;
  /** The author of the message it replies to, when held. */
  parentAuthor: string | undefined;
  /** Its replies held: "id author" pairs, one a line. */
  replyIds: string;
  /** The author of the attempt it retries, when held. */
  retryAuthor: string | undefined;
  highlighted: boolean;
  canRevert: boolean;
  /** Whether the page may write a reply to it. */
  canReply: boolean;
  /** Whether the page's identity may answer its input requests. */
  canAnswer: boolean;
  onAnswer: AnswerInput;
  onJump: (id: string) => void;
  onRevert: (m: Message) => void;
  onReply: (m: Message) => void;
  onFetch: (id: string) => void;
}

/**
 * One message, part by part: markdown text (with a cursor while it
 * streams), a tool card per tool call, an input card per input request
 * (answered where it stands), the error banner of an error part,
 * and its marks (stopped, retried, a retry, no reply). Memoized: it renders
 * again only when its message (by reference) or a mark changed.
 */
export const MessageView = memo(function MessageView(p: MessageProps) {
  const m = p.message;
  const finish = m.parts.find((x) => x.type === "finish");
  const stopped = m.status === "canceled" || finish?.reason === "canceled";
  const failed = m.status === "error" || finish?.reason === "error";
  const streaming = m.status === "streaming";
  const label = `${m.agentId || "unknown"}${m.role !== "assistant" ? ` (${m.role})` : ""}${p.nested ? `, delegated by ${p.owner}` : ""}`;
  const replies = p.replyIds ? p.replyIds.split("\n").map((l) => l.split(" ") as [string, string]) : [];
  const { onFetch } = p;
  const summarized = m.summarized !== undefined;
  useEffect(() => {
    if (summarized) onFetch(m.id); // read on demand: when it is shown
  }, [summarized, m.id, onFetch]);
  return (
    <article
      className={`msg msg-${m.role}${p.nested ? " nested" : ""}${p.highlighted ? " highlighted" : ""}${streaming ? " is-streaming" : ""}`}
      aria-label={`Message from ${label}`}
      data-message-id={m.id}
      data-status={m.status}
      tabIndex={-1}
    >
      <header className="msg-head">
        <span className="who">{m.agentId || "unknown"}</span>
        {m.role !== "assistant" && <span className="role">{m.role}</span>}
        {p.nested && <span className="mark mark-delegate">worker of {p.owner}</span>}
        {m.awaitingInput ? <span className="mark mark-awaiting">waiting for input</span> : streaming && <span className="mark mark-streaming">streaming</span>}
        {stopped && <span className="mark mark-stopped">stopped</span>}
        {p.retried && <span className="mark mark-retried" title="this attempt failed and was tried again">retried</span>}
        {m.retryOf && (
          <button type="button" className="mark mark-retry linkish" onClick={() => p.onJump(m.retryOf!)}>
            retry of {p.retryAuthor ?? "an attempt"}
          </button>
        )}
        {p.noReply && <span className="mark mark-noreply">{NO_REPLY}</span>}
        <time className="when" dateTime={m.createdAt ?? undefined}>
          {shortTime(m.createdAt)}
        </time>
        {p.canReply && (
          <button type="button" className="icon-button reply" aria-label={`Reply to this message of ${m.agentId}`} title="Reply in its thread" onClick={() => p.onReply(m)}>
            ↩
          </button>
        )}
        {/* Kept in place while the message streams, so that its time does not move when it ends. */}
        {p.canRevert && (
          <button
            type="button"
            className={streaming ? "icon-button revert invisible" : "icon-button revert"}
            aria-label={`Revert from this message of ${m.agentId}`}
            aria-hidden={streaming}
            disabled={streaming}
            title="Revert from here"
            onClick={() => p.onRevert(m)}
          >
            ↺
          </button>
        )}
      </header>
      {m.replyTo && (
        <button type="button" className="thread-link linkish" onClick={() => p.onJump(m.replyTo!)}>
          ↳ replying to {p.parentAuthor ?? "an earlier message"}
        </button>
      )}
      <div className="msg-body">
        {summarized ? (
          <div className="summarized">
            Large message ({bytes(m.summarized!.bytes)}), loading…{" "}
            <button type="button" className="linkish" onClick={() => onFetch(m.id)}>
              Load it
            </button>
          </div>
        ) : (
          m.parts.map((part, i) => {
            switch (part.type) {
              case "text":
                return part.text || part.streaming ? <Markdown key={i} text={part.text ?? ""} streaming={part.streaming === true && streaming} /> : null;
              case "tool-call":
                return <ToolCard key={part.callId || i} part={part} openKey={m.id + "\u0000" + (part.callId || i)} />;
              case "input-request":
                return <InputCard key={"input:" + part.requestId} part={part} messageId={m.id} asker={m.agentId} canAnswer={p.canAnswer} onAnswer={p.onAnswer} />;
              case "error":
                return (
                  <div key={i} className="error-banner" role="note">
                    <strong>Error:</strong> {part.message ?? "the agent failed"}
                  </div>
                );
              default:
                return null;
            }
          })
        )}
        {streaming && !m.awaitingInput && !summarized && !m.parts.some((x) => x.type === "text" && x.streaming) && <span className="cursor" aria-hidden="true" />}
        {failed && !m.parts.some((x) => x.type === "error") && (
          <div className="error-banner" role="note">
            <strong>Error:</strong> the answer failed
          </div>
        )}
      </div>
      {replies.length > 0 && (
        <div className="replies">
          <span>{replies.length === 1 ? "1 reply:" : `${replies.length} replies:`}</span>
          {replies.map(([id, author]) => (
            <button key={id} type="button" className="linkish" onClick={() => p.onJump(id)}>
              {author || id}
            </button>
          ))}
        </div>
      )}
    </article>
  );
});
