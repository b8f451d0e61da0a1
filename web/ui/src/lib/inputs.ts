// What the page draws of an agent's input request: the form a question's
// JSON Schema becomes, the answer its values make, and the line that says
// how a request ended. Pure functions, tested apart (test/inputs.test.ts).

import type { InputRequestPart } from "@parleyhq/client";
import { shortTime } from "./format";

/** One control of a question's form. */
export interface FormField {
  /** The property's name ("" for a schema that is one value, not an object). */
  name: string;
  label: string;
  description?: string;
  kind: "string" | "text" | "number" | "integer" | "boolean" | "enum";
  /** The choices of an enum (as JSON values; shown as text). */
  choices?: unknown[];
  required: boolean;
}

/** A form drawn from a schema: its fields, and whether the answer is an object of them or the one value. */
export interface SchemaForm {
  fields: FormField[];
  object: boolean;
}

type Schema = Record<string, unknown>;

const isSchema = (v: unknown): v is Schema => typeof v === "object" && v !== null && !Array.isArray(v);

/** The field a property's schema makes, or null if it is not a simple value. */
function fieldOf(name: string, s: unknown, required: boolean): FormField | null {
  if (!isSchema(s)) return null;
  const label = typeof s["title"] === "string" && s["title"] ? s["title"] : name || "Answer";
  const f: FormField = { name, label, kind: "string", required };
  if (typeof s["description"] === "string" && s["description"]) f.description = s["description"];
  if (Array.isArray(s["enum"]) && s["enum"].length > 0) return { ...f, kind: "enum", choices: s["enum"] };
  switch (s["type"]) {
    case "string":
      return { ...f, kind: s["format"] === "textarea" || (typeof s["maxLength"] === "number" ? s["maxLength"] > 200 : false) ? "text" : "string" };
    case "number":
      return { ...f, kind: "number" };
    case "integer":
      return { ...f, kind: "integer" };
    case "boolean":
      return { ...f, kind: "boolean" };
    default:
      return null;
  }
}

/**
 * The form a question's schema becomes: an object whose properties are
 * strings, numbers, integers, booleans or enums is a field each; a schema
 * of one such value is one field. Anything else (nested objects, arrays,
 * combinators) is null: the page asks for the answer as JSON text.
 */
export function schemaForm(schema: unknown): SchemaForm | null {
  if (!isSchema(schema)) return null;
  if (schema["type"] === "object" || isSchema(schema["properties"])) {
    const props = schema["properties"];
    if (!isSchema(props)) return null;
    const required = new Set(Array.isArray(schema["required"]) ? schema["required"].filter((x): x is string => typeof x === "string") : []);
    const fields: FormField[] = [];
    for (const [name, s] of Object.entries(props)) {
      const f = fieldOf(name, s, required.has(name));
      if (!f) return null;
      fields.push(f);
    }
    return fields.length > 0 ? { fields, object: true } : null;
  }
  const f = fieldOf("", schema, true);
  return f ? { fields: [f], object: false } : null;
}

/** What a form's controls hold: text for text, numbers and enums (an enum's choice by index), a boolean for a checkbox. */
export type FormValues = Record<string, string | boolean>;

/**
 * The answer a form's values make, or an error to show: a required field
 * left empty, a number that is none. Fields left empty that are not
 * required are left out.
 */
export function formAnswer(form: SchemaForm, values: FormValues): { answer: unknown } | { error: string } {
  const out: Record<string, unknown> = {};
  for (const f of form.fields) {
    const v = values[f.name];
    let value: unknown;
    if (f.kind === "boolean") value = v === true;
    else {
      const t = typeof v === "string" ? v : "";
      if (t.trim() === "") {
        if (f.required) return { error: `${f.label} is required.` };
        continue;
      }
      if (f.kind === "number" || f.kind === "integer") {
        const n = Number(t);
        if (!Number.isFinite(n) || (f.kind === "integer" && !Number.isInteger(n))) return { error: `${f.label} must be ${f.kind === "integer" ? "a whole number" : "a number"}.` };
        value = n;
      } else if (f.kind === "enum") {
        value = f.choices![Number(t)];
      } else value = t;
    }
    if (!form.object) return { answer: value };
    out[f.name] = value;
  }
  return { answer: out };
}

/** A JSON value as a line of text: a string as itself, anything else as JSON. */
export function valueText(v: unknown): string {
  return typeof v === "string" ? v : JSON.stringify(v);
}

/** The answer of a request in a few words: approved or denied, the choices, the text, or the JSON. */
export function answerText(p: InputRequestPart): string {
  const a = p.answer;
  if (typeof a === "object" && a !== null && !Array.isArray(a)) {
    const r = a as Record<string, unknown>;
    if (p.kind === "approval" && typeof r["approved"] === "boolean") {
      return (r["approved"] ? "Approved" : "Denied") + (typeof r["reason"] === "string" && r["reason"] ? `: ${r["reason"]}` : "");
    }
    if (Array.isArray(r["choices"])) return r["choices"].map(valueText).join(", ");
    if (typeof r["text"] === "string" && Object.keys(r).length === 1) return r["text"];
    const flat = Object.entries(r);
    if (flat.every(([, v]) => v === null || typeof v !== "object")) {
      return flat.map(([k, v]) => `${k}: ${v === true ? "yes" : v === false ? "no" : valueText(v)}`).join(" · ");
    }
  }
  return a === undefined ? "" : valueText(a);
}

/** How a request that ended did: who answered it and when, or that it expired or was canceled (and why). */
export function outcomeText(p: InputRequestPart, now?: Date): string {
  const when = p.answeredAt ? ` at ${shortTime(p.answeredAt, now)}` : "";
  switch (p.status) {
    case "answered": {
      const verb = p.kind === "approval" ? (answerText(p).startsWith("Approved") ? "Approved" : "Denied") : "Answered";
      return `${verb} by ${p.answeredBy || "someone"}${when}`;
    }
    case "expired":
      return `Expired unanswered${when}`;
    case "canceled":
      return `Canceled${p.reason ? ` (${p.reason})` : ""}${when}`;
    default:
      return p.expiresAt ? `Waiting for an answer until ${shortTime(p.expiresAt, now)}` : "Waiting for an answer";
  }
}

/** The title a request is shown with: its own, or one made of its tool. */
export function requestTitle(p: { kind: string; title?: string; toolName?: string }): string {
  if (p.title) return p.title;
  if (p.kind === "approval") return p.toolName ? `Approve ${p.toolName}?` : "Approve?";
  return "A question";
}
