import { useEffect, useId, useRef, useState, type FormEvent } from "react";
import type { TurnPolicy } from "@parleyhq/client";
import type { ConvFields } from "../lib/convform";

/** What sending the form came to: done, or the error to show (at a field, when it is one's). */
export type Outcome = { ok: true } | { ok: false; error: string; field?: keyof ConvFields };

export interface ConversationFormProps {
  /** The dialog's title: "New conversation", "Edit conversation". */
  title: string;
  /** The submit button's text. */
  submit: string;
  initial: ConvFields;
  /** Making a conversation: its turn policy and message format may be chosen (they cannot change later). */
  creating: boolean;
  /** Checks the fields, and sends them when they are right: the error to show, or null when done. */
  onSubmit: (f: ConvFields) => Promise<Outcome>;
  onCancel: () => void;
}

const POLICIES: { value: TurnPolicy; label: string }[] = [
  { value: "round-robin", label: "Round robin: participants take turns in order" },
  { value: "free", label: "Free: anyone may start the next turn" },
  { value: "next", label: "Next: each turn names who goes next" },
];

/**
 * Makes or edits a conversation, in a modal dialog (focus kept inside,
 * Escape cancels): its title, participants and members (agent ids,
 * separated by commas or spaces), metadata (key = value lines) and, when
 * making one, its turn policy and message format.
 */
export function ConversationForm(p: ConversationFormProps) {
  const ref = useRef<HTMLDialogElement>(null);
  const [f, setF] = useState<ConvFields>(p.initial);
  const [error, setError] = useState<{ field?: keyof ConvFields; text: string } | null>(null);
  const [busy, setBusy] = useState(false);
  const uid = useId();
  useEffect(() => {
    const d = ref.current;
    if (d && !d.open) d.showModal();
    return () => d?.close();
  }, []);
  const set = (k: keyof ConvFields) => (e: { target: { value: string } }) => setF((x) => ({ ...x, [k]: e.target.value }));
  const submit = async (e: FormEvent) => {
    e.preventDefault();
    if (busy) return;
    setBusy(true);
    try {
      const r = await p.onSubmit(f);
      if (!r.ok) setError({ field: r.field, text: r.error });
    } finally {
      setBusy(false);
    }
  };
  const id = (k: string) => `${uid}-${k}`;
  const invalid = (k: keyof ConvFields) => (error?.field === k ? { "aria-invalid": true, "aria-describedby": id("error") } : {});
  return (
    <dialog
      ref={ref}
      className="dialog form-dialog"
      aria-labelledby={id("title")}
      onCancel={(e) => {
        e.preventDefault();
        p.onCancel();
      }}
    >
      <form onSubmit={(e) => void submit(e)}>
        <h2 id={id("title")}>{p.title}</h2>
        <div className="form-field">
          <label htmlFor={id("t")}>Title</label>
          <input id={id("t")} value={f.title} onChange={set("title")} maxLength={256} autoFocus placeholder="What it is about" />
        </div>
        <div className="form-field">
          <label htmlFor={id("p")}>Participants</label>
          <input id={id("p")} value={f.participants} onChange={set("participants")} placeholder="planner, coder, you" aria-describedby={id("p-help")} {...invalid("participants")} />
          <small id={id("p-help")}>Agents and people who take turns, separated by commas.</small>
        </div>
        <div className="form-field">
          <label htmlFor={id("m")}>Members</label>
          <input id={id("m")} value={f.members} onChange={set("members")} placeholder="reviewer" aria-describedby={id("m-help")} {...invalid("members")} />
          <small id={id("m-help")}>Others whose tokens may read and write it.</small>
        </div>
        {p.creating && (
          <div className="form-row">
            <div className="form-field">
              <label htmlFor={id("tp")}>Turns</label>
              <select id={id("tp")} value={f.turnPolicy} onChange={set("turnPolicy")}>
                {POLICIES.map((x) => (
                  <option key={x.value} value={x.value}>
                    {x.label}
                  </option>
                ))}
              </select>
            </div>
            <div className="form-field">
              <label htmlFor={id("mf")}>Messages</label>
              <select id={id("mf")} value={f.messageFormat} onChange={set("messageFormat")}>
                <option value="v2">Parts (text, tools, requests)</option>
                <option value="v1">Plain text</option>
              </select>
            </div>
          </div>
        )}
        <div className="form-field">
          <label htmlFor={id("md")}>Metadata</label>
          <textarea id={id("md")} value={f.metadata} onChange={set("metadata")} rows={3} placeholder="team = infra" aria-describedby={id("md-help")} {...invalid("metadata")} />
          <small id={id("md-help")}>One key = value a line.</small>
        </div>
        {error && (
          <p id={id("error")} className="form-error" role="alert">
            {error.text}
          </p>
        )}
        <div className="dialog-actions">
          <button type="button" onClick={p.onCancel}>
            Cancel
          </button>
          <button type="submit" className="primary" disabled={busy}>
            {p.submit}
          </button>
        </div>
      </form>
    </dialog>
  );
}
