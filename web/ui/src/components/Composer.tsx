import { useEffect, useId, useRef, useState, type KeyboardEvent } from "react";
import type { Message, PromptMode } from "@parleyhq/client";
import { firstLine } from "../lib/format";
import { MODES } from "../lib/modes";

/** What the composer sends: a prompt for an agent to answer (queued), or a message written into the conversation. */
export type Sending = { kind: "prompt"; mode: PromptMode; to?: string } | { kind: "message"; replyTo?: string };

export interface ComposerProps {
  disabled: boolean;
  /** An answer is under way: the Stop button shows. */
  answering: boolean;
  /** The conversation's participants: the agents a prompt may ask. */
  agents: readonly string[];
  /** The agents with a runner attached, or null when not known: asking one without says so. */
  runners: readonly string[] | null;
  /** Who holds an open turn, when it is not the page's writer: a message is refused until it ends. */
  floor: string | null;
  /** The message a reply answers (the composer then writes a message in its thread). */
  replyTo: Message | null;
  onCancelReply: () => void;
  onSend: (text: string, how: Sending) => Promise<boolean>;
  onStop: () => void;
  note: string;
}

/**
 * The box a person writes in: a prompt for an agent (to anyone or a chosen
 * one, and when it is answered), or a message of their own, or a reply in
 * a message's thread. Enter sends, Shift+Enter starts a new line; Stop
 * while an answer streams.
 */
export function Composer(p: ComposerProps) {
  const [text, setText] = useState("");
  const [kind, setKind] = useState<"prompt" | "message">("prompt");
  const [mode, setMode] = useState<PromptMode>("followup");
  const [to, setTo] = useState("");
  const [sending, setSending] = useState(false);
  const box = useRef<HTMLTextAreaElement>(null);
  const uid = useId();
  const replying = p.replyTo !== null;
  const asMessage = replying || kind === "message";
  // Choosing Reply on a message puts the cursor here.
  useEffect(() => {
    if (p.replyTo) box.current?.focus();
  }, [p.replyTo]);
  // An agent who left the conversation is no longer one to ask.
  const target = to && p.agents.includes(to) ? to : "";
  const absent = !asMessage && p.runners !== null && (target ? !p.runners.includes(target) : p.runners.length === 0);
  const send = async () => {
    const t = text.trim();
    if (!t || sending || p.disabled) return;
    setSending(true);
    try {
      const how: Sending = asMessage ? { kind: "message", ...(p.replyTo ? { replyTo: p.replyTo.id } : {}) } : { kind: "prompt", mode, ...(target ? { to: target } : {}) };
      if (await p.onSend(t, how)) setText("");
    } finally {
      setSending(false);
    }
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void send();
    } else if (e.key === "Escape" && replying) {
      e.preventDefault();
      p.onCancelReply();
    }
  };
  const help = MODES.find((m) => m.mode === mode)?.help;
  return (
    <form
      className="composer"
      aria-label="Write"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      {p.replyTo && (
        <div className="replying" role="status">
          <span>
            Replying to {p.replyTo.agentId || "a message"}: <q>{firstLine(p.replyTo.content, 60) || "no text"}</q>
          </span>
          <button type="button" className="icon-button" aria-label="Cancel the reply" onClick={p.onCancelReply}>
            ×
          </button>
        </div>
      )}
      <textarea
        ref={box}
        aria-label={asMessage ? "Message" : "Prompt"}
        placeholder={p.disabled ? p.note : asMessage ? "Write a message… (Enter sends, Shift+Enter for a new line)" : "Ask… (Enter sends, Shift+Enter for a new line)"}
        value={text}
        rows={2}
        disabled={p.disabled}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKey}
      />
      <div className="composer-actions">
        {!replying && (
          <select aria-label="Send as" value={kind} onChange={(e) => setKind(e.target.value as "prompt" | "message")} disabled={p.disabled} title={kind === "prompt" ? "A prompt is queued for an agent to answer" : "A message is written into the conversation as it is"}>
            <option value="prompt">Prompt</option>
            <option value="message">Message</option>
          </select>
        )}
        {!asMessage && (
          <>
            <select aria-label="Ask" value={target} onChange={(e) => setTo(e.target.value)} disabled={p.disabled} aria-describedby={absent ? `${uid}-absent` : undefined}>
              <option value="">Any agent</option>
              {p.agents.map((a) => (
                <option key={a} value={a}>
                  {a}
                  {p.runners && !p.runners.includes(a) ? " (no runner)" : ""}
                </option>
              ))}
            </select>
            <select aria-label="When" value={mode} onChange={(e) => setMode(e.target.value as PromptMode)} disabled={p.disabled} title={help} aria-describedby={`${uid}-mode`}>
              {MODES.map((m) => (
                <option key={m.mode} value={m.mode}>
                  {m.label}
                </option>
              ))}
            </select>
          </>
        )}
        {/* Kept in place while hidden, so that the buttons do not move when an answer starts. */}
        <button type="button" className={p.answering ? "stop" : "stop invisible"} onClick={p.onStop} disabled={p.disabled || !p.answering} aria-hidden={!p.answering}>
          Stop
        </button>
        <button type="submit" className="primary" disabled={p.disabled || sending || text.trim() === ""}>
          {replying ? "Reply" : "Send"}
        </button>
      </div>
      {asMessage && p.floor && (
        <p className="composer-hint" role="status">
          <span className="no-runner">
            {p.floor}'s turn is open: a message is refused until it ends; a prompt waits in line instead.
          </span>
        </p>
      )}
      {!asMessage && (
        <p className="composer-hint">
          <span id={`${uid}-mode`} className="mode-help">
            {help}.
          </span>{" "}
          {absent && (
            <span id={`${uid}-absent`} className="no-runner" role="status">
              {target ? `No runner of ${target} is connected: the prompt waits until one connects.` : "No runner is connected: the prompt waits until one connects."}
            </span>
          )}
        </p>
      )}
    </form>
  );
}
