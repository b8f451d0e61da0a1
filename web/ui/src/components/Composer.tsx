import { useState, type KeyboardEvent } from "react";
import type { PromptMode } from "@parleyhq/client";

export interface ComposerProps {
  disabled: boolean;
  /** An answer is under way: the Stop button shows. */
  answering: boolean;
  onSend: (text: string, mode: PromptMode) => Promise<boolean>;
  onStop: () => void;
  note: string;
}

const MODES: { mode: PromptMode; label: string; help: string }[] = [
  { mode: "followup", label: "Follow-up", help: "answered after the prompts before it" },
  { mode: "steer", label: "Steer", help: "stops the answer under way and goes first" },
  { mode: "collect", label: "Collect", help: "prompts sent within 2 s are merged into one" },
];

/** The prompt box: Enter sends, Shift+Enter starts a new line; the mode; Stop while an answer streams. */
export function Composer(p: ComposerProps) {
  const [text, setText] = useState("");
  const [mode, setMode] = useState<PromptMode>("followup");
  const [sending, setSending] = useState(false);
  const send = async () => {
    const t = text.trim();
    if (!t || sending || p.disabled) return;
    setSending(true);
    try {
      if (await p.onSend(t, mode)) setText("");
    } finally {
      setSending(false);
    }
  };
  const onKey = (e: KeyboardEvent<HTMLTextAreaElement>) => {
    if (e.key === "Enter" && !e.shiftKey && !e.nativeEvent.isComposing) {
      e.preventDefault();
      void send();
    }
  };
  return (
    <form
      className="composer"
      onSubmit={(e) => {
        e.preventDefault();
        void send();
      }}
    >
      <textarea
        aria-label="Prompt"
        placeholder={p.disabled ? p.note : "Ask… (Enter sends, Shift+Enter for a new line)"}
        value={text}
        rows={2}
        disabled={p.disabled}
        onChange={(e) => setText(e.target.value)}
        onKeyDown={onKey}
      />
      <div className="composer-actions">
        <select aria-label="Mode" value={mode} onChange={(e) => setMode(e.target.value as PromptMode)} disabled={p.disabled} title={MODES.find((m) => m.mode === mode)?.help}>
          {MODES.map((m) => (
            <option key={m.mode} value={m.mode}>
              {m.label}
            </option>
          ))}
        </select>
        {/* Kept in place while hidden, so that the buttons do not move when an answer starts. */}
        <button type="button" className={p.answering ? "stop" : "stop invisible"} onClick={p.onStop} disabled={p.disabled || !p.answering} aria-hidden={!p.answering}>
          Stop
        </button>
        <button type="submit" className="primary" disabled={p.disabled || sending || text.trim() === ""}>
          Send
        </button>
      </div>
    </form>
  );
}
