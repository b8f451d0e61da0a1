import { memo, useId, useState, type FormEvent } from "react";
import type { InputRequestPart } from "@parleyhq/client";
import { errorText, pretty, shortTime } from "../lib/format";
import { answerText, formAnswer, outcomeText, requestTitle, schemaForm, valueText, type FormField, type FormValues, type SchemaForm } from "../lib/inputs";
import { Markdown } from "./Markdown";

/** Sends an answer to a request of a message; rejects with the server's refusal. */
export type AnswerInput = (messageId: string, requestId: string, answer: unknown) => Promise<void>;

interface CardProps {
  part: InputRequestPart;
  messageId: string;
  /** The agent that asked. */
  asker: string;
  /** Whether the page's identity may answer (not a viewer, not the asking agent). */
  canAnswer: boolean;
  onAnswer: AnswerInput;
}

/**
 * An agent's input request where it stands in its message: an approval
 * (the tool's name and arguments, Approve and Deny with an optional
 * reason) or a question (its options as radio buttons or checkboxes, a
 * form drawn from its JSON Schema, or a text box); once it ended, who
 * answered and when, or that it expired or was canceled.
 */
export const InputCard = memo(function InputCard(p: CardProps) {
  const { part } = p;
  const id = useId();
  const pending = part.status === "pending";
  const title = requestTitle(part);
  const kindText = part.kind === "approval" ? "Approval" : "Question";
  return (
    <section
      className={`input input-${part.status}`}
      role="group"
      aria-labelledby={id + "-title"}
      aria-describedby={id + "-state"}
      data-request-id={part.requestId}
      tabIndex={-1}
    >
      <header className="input-head">
        <span className={`badge badge-input-${part.status}`}>{pending ? `${kindText} needed` : kindText}</span>
        <h2 className="input-title" id={id + "-title"}>
          {title}
        </h2>
      </header>
      {part.detail && <Markdown text={part.detail} streaming={false} />}
      {part.kind === "approval" && (part.toolName || part.args !== undefined) && (
        <div className="input-tool">
          <div className="tool-label">
            Tool <code>{part.toolName || "tool"}</code>
            {part.args !== undefined ? " with arguments" : ""}
          </div>
          {part.args !== undefined && <pre>{pretty(part.args)}</pre>}
        </div>
      )}
      <p className="input-state" id={id + "-state"}>
        {pending ? `${p.asker || "An agent"} waits for an answer${part.expiresAt ? ` until ${shortTime(part.expiresAt)}` : ""}.` : outcomeText(part)}
      </p>
      {!pending && part.status === "answered" && part.kind !== "approval" && <p className="input-answer">{answerText(part)}</p>}
      {!pending && part.status === "answered" && part.kind === "approval" && (part.answer as { reason?: string } | undefined)?.reason && (
        <p className="input-answer">Reason: {(part.answer as { reason: string }).reason}</p>
      )}
      {pending && p.canAnswer && (part.kind === "approval" ? <ApprovalForm {...p} title={title} /> : <QuestionForm {...p} title={title} />)}
      {pending && !p.canAnswer && <p className="muted">You cannot answer it with this identity.</p>}
    </section>
  );
});

/** Runs an answer, keeping whether it is under way and why it was refused. */
function useSend(p: CardProps): { busy: boolean; error: string | null; setError: (e: string | null) => void; send: (answer: unknown) => void } {
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<string | null>(null);
  const send = (answer: unknown): void => {
    setBusy(true);
    setError(null);
    p.onAnswer(p.messageId, p.part.requestId, answer).then(
      () => setBusy(false),
      (err: unknown) => {
        setBusy(false);
        setError(errorText(err));
      },
    );
  };
  return { busy, error, setError, send };
}

function Refusal({ error }: { error: string | null }) {
  return error ? (
    <p className="input-error" role="alert">
      {error}
    </p>
  ) : null;
}

function ApprovalForm(p: CardProps & { title: string }) {
  const id = useId();
  const [reason, setReason] = useState("");
  const { busy, error, send } = useSend(p);
  const answer = (approved: boolean): void => send(reason.trim() ? { approved, reason: reason.trim() } : { approved });
  return (
    <div className="input-form">
      <label className="input-field" htmlFor={id}>
        <span>Reason (optional)</span>
        <input id={id} type="text" value={reason} maxLength={2000} onChange={(e) => setReason(e.target.value)} disabled={busy} />
      </label>
      <div className="input-actions">
        <button type="button" className="primary" disabled={busy} onClick={() => answer(true)} aria-label={`Approve: ${p.title}`}>
          Approve
        </button>
        <button type="button" className="danger" disabled={busy} onClick={() => answer(false)} aria-label={`Deny: ${p.title}`}>
          Deny
        </button>
      </div>
      <Refusal error={error} />
    </div>
  );
}

function QuestionForm(p: CardProps & { title: string }) {
  const { part } = p;
  const form = part.schema !== undefined ? schemaForm(part.schema) : null;
  if (part.schema === undefined && part.options && part.options.length > 0) return <ChoiceForm {...p} />;
  if (form) return <SchemaFormView {...p} form={form} />;
  return <TextForm {...p} json={part.schema !== undefined} />;
}

function ChoiceForm(p: CardProps & { title: string }) {
  const { part } = p;
  const multiple = part.multiple === true;
  const [chosen, setChosen] = useState<ReadonlySet<string>>(new Set());
  const { busy, error, setError, send } = useSend(p);
  const name = useId();
  const submit = (e: FormEvent): void => {
    e.preventDefault();
    if (chosen.size === 0) return setError(multiple ? "Choose at least one." : "Choose one.");
    send({ choices: (part.options ?? []).map((o) => o.label).filter((l) => chosen.has(l)) });
  };
  const pick = (label: string, on: boolean): void => {
    if (!multiple) return setChosen(new Set([label]));
    const n = new Set(chosen);
    if (on) n.add(label);
    else n.delete(label);
    setChosen(n);
  };
  return (
    <form className="input-form" onSubmit={submit}>
      <fieldset disabled={busy}>
        <legend className="sr-only">{p.title}</legend>
        {(part.options ?? []).map((o, i) => (
          <label key={o.label + i} className="input-choice">
            <input type={multiple ? "checkbox" : "radio"} name={name} value={o.label} checked={chosen.has(o.label)} onChange={(e) => pick(o.label, e.target.checked)} />
            <span>
              {o.label}
              {o.description && <span className="muted"> — {o.description}</span>}
            </span>
          </label>
        ))}
      </fieldset>
      <div className="input-actions">
        <button type="submit" className="primary" disabled={busy}>
          Send answer
        </button>
      </div>
      <Refusal error={error} />
    </form>
  );
}

function SchemaFormView(p: CardProps & { title: string; form: SchemaForm }) {
  const { form } = p;
  const [values, setValues] = useState<FormValues>({});
  const { busy, error, setError, send } = useSend(p);
  const submit = (e: FormEvent): void => {
    e.preventDefault();
    const r = formAnswer(form, values);
    if ("error" in r) return setError(r.error);
    send(r.answer);
  };
  return (
    <form className="input-form" onSubmit={submit} noValidate>
      <fieldset disabled={busy}>
        <legend className="sr-only">{p.title}</legend>
        {form.fields.map((f) => (
          <Field key={f.name} f={f} value={values[f.name]} onChange={(v) => setValues((vs) => ({ ...vs, [f.name]: v }))} />
        ))}
      </fieldset>
      <div className="input-actions">
        <button type="submit" className="primary" disabled={busy}>
          Send answer
        </button>
      </div>
      <Refusal error={error} />
    </form>
  );
}

function Field({ f, value, onChange }: { f: FormField; value: string | boolean | undefined; onChange: (v: string | boolean) => void }) {
  const id = useId();
  const label = (
    <span>
      {f.label}
      {f.required ? <span aria-hidden="true"> *</span> : <span className="muted"> (optional)</span>}
    </span>
  );
  const described = f.description ? id + "-d" : undefined;
  const note = f.description ? (
    <span className="muted input-note" id={id + "-d"}>
      {f.description}
    </span>
  ) : null;
  if (f.kind === "boolean") {
    return (
      <label className="input-choice" htmlFor={id}>
        <input id={id} type="checkbox" checked={value === true} onChange={(e) => onChange(e.target.checked)} aria-describedby={described} />
        {label}
        {note}
      </label>
    );
  }
  const text = typeof value === "string" ? value : "";
  let control;
  if (f.kind === "enum") {
    control = (
      <select id={id} value={text} onChange={(e) => onChange(e.target.value)} required={f.required} aria-describedby={described}>
        <option value="">Choose…</option>
        {(f.choices ?? []).map((c, i) => (
          <option key={i} value={String(i)}>
            {valueText(c)}
          </option>
        ))}
      </select>
    );
  } else if (f.kind === "text") {
    control = <textarea id={id} value={text} rows={3} onChange={(e) => onChange(e.target.value)} required={f.required} aria-describedby={described} />;
  } else {
    const numeric = f.kind === "number" || f.kind === "integer";
    control = (
      <input
        id={id}
        type={numeric ? "number" : "text"}
        step={f.kind === "integer" ? 1 : numeric ? "any" : undefined}
        inputMode={f.kind === "integer" ? "numeric" : numeric ? "decimal" : undefined}
        value={text}
        onChange={(e) => onChange(e.target.value)}
        required={f.required}
        aria-describedby={described}
      />
    );
  }
  return (
    <label className="input-field" htmlFor={id}>
      {label}
      {control}
      {note}
    </label>
  );
}

function TextForm(p: CardProps & { title: string; json: boolean }) {
  const id = useId();
  const [text, setText] = useState("");
  const { busy, error, setError, send } = useSend(p);
  const submit = (e: FormEvent): void => {
    e.preventDefault();
    if (!text.trim()) return setError("Write an answer first.");
    if (!p.json) return send({ text });
    try {
      send(JSON.parse(text) as unknown);
    } catch {
      setError("The answer must be JSON.");
    }
  };
  return (
    <form className="input-form" onSubmit={submit}>
      <label className="input-field" htmlFor={id}>
        <span>{p.json ? "Your answer (JSON)" : "Your answer"}</span>
        <textarea id={id} value={text} rows={3} maxLength={100_000} onChange={(e) => setText(e.target.value)} disabled={busy} />
      </label>
      <div className="input-actions">
        <button type="submit" className="primary" disabled={busy}>
          Send answer
        </button>
      </div>
      <Refusal error={error} />
    </form>
  );
}
