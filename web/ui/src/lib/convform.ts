// The conversation form's fields, as a person types them, and what they
// become: the body that makes a conversation, or the patch that changes
// one (only what changed: a title, metadata keys set or removed, names
// added or removed), so that two people editing different things at once
// do not undo each other.

import type { Conversation, ConversationPatch, NewConversation, TurnPolicy } from "@parleyhq/client";

/** What the form holds: text as typed. */
export interface ConvFields {
  title: string;
  /** Agent ids, separated by commas, spaces or new lines. */
  participants: string;
  members: string;
  turnPolicy: TurnPolicy;
  messageFormat: "v1" | "v2";
  /** One `key = value` a line; a value that reads as JSON (a number, true, {…}) is kept as such, else it is text. */
  metadata: string;
}

/** The result of reading the form: what to send, or what is wrong with it (field and why). */
export type Parsed<T> = { ok: true; value: T } | { ok: false; field: keyof ConvFields; error: string };

const NAME = /^[A-Za-z0-9._:-]{1,128}$/;

/** The names of a list field, in order, each once; an error names the first that is not an agent id. */
export function parseNames(text: string): { names: string[]; bad?: string } {
  const names: string[] = [];
  for (const n of text.split(/[\s,]+/)) {
    if (n === "") continue;
    if (!NAME.test(n) || n === "." || n === "..") return { names, bad: n };
    if (!names.includes(n)) names.push(n);
  }
  return { names };
}

/** The metadata lines as an object; null when there are none. */
export function parseMetadata(text: string): { value: Record<string, unknown> | null; bad?: string } {
  const out: Record<string, unknown> = {};
  let any = false;
  for (const raw of text.split("\n")) {
    const line = raw.trim();
    if (line === "") continue;
    const eq = line.indexOf("=");
    if (eq <= 0) return { value: null, bad: line };
    const key = line.slice(0, eq).trim();
    const v = line.slice(eq + 1).trim();
    if (key === "") return { value: null, bad: line };
    out[key] = readValue(v);
    any = true;
  }
  return { value: any ? out : null };
}

function readValue(v: string): unknown {
  if (/^(-?\d|true$|false$|null$|[[{"])/.test(v)) {
    try {
      return JSON.parse(v);
    } catch {
      // plain text that merely starts like JSON
    }
  }
  return v;
}

/** Metadata as the form shows it: one `key = value` a line (text as it is, anything else as JSON). */
export function formatMetadata(m: unknown): string {
  if (!m || typeof m !== "object" || Array.isArray(m)) return "";
  return Object.entries(m as Record<string, unknown>)
    .map(([k, v]) => `${k} = ${typeof v === "string" && readValue(v) === v ? v : JSON.stringify(v)}`)
    .join("\n");
}

/** The form's fields for a conversation (to edit it), or empty ones (to make one). */
export function fieldsOf(c?: Conversation | null): ConvFields {
  return {
    title: c?.title ?? "",
    participants: (c?.participants ?? []).join(", "),
    members: (c?.members ?? []).join(", "),
    turnPolicy: c?.turnPolicy ?? "round-robin",
    messageFormat: (c?.messageFormat as "v1" | "v2" | undefined) ?? "v2",
    metadata: formatMetadata(c?.metadata),
  };
}

function readLists(f: ConvFields): Parsed<{ participants: string[]; members: string[]; metadata: Record<string, unknown> | null }> {
  const p = parseNames(f.participants);
  if (p.bad !== undefined) return { ok: false, field: "participants", error: `"${p.bad}" is not an agent id (letters, digits and . _ : - only)` };
  const m = parseNames(f.members);
  if (m.bad !== undefined) return { ok: false, field: "members", error: `"${m.bad}" is not an agent id (letters, digits and . _ : - only)` };
  const md = parseMetadata(f.metadata);
  if (md.bad !== undefined) return { ok: false, field: "metadata", error: `"${md.bad}" is not a line of the form key = value` };
  return { ok: true, value: { participants: p.names, members: m.names, metadata: md.value } };
}

/** The body that makes the conversation the form describes. */
export function newConversationOf(f: ConvFields): Parsed<NewConversation> {
  const r = readLists(f);
  if (!r.ok) return r;
  const body: NewConversation = { participants: r.value.participants, turnPolicy: f.turnPolicy, messageFormat: f.messageFormat };
  if (f.title.trim()) body.title = f.title.trim();
  if (r.value.members.length) body.members = r.value.members;
  if (r.value.metadata) body.metadata = r.value.metadata;
  return { ok: true, value: body };
}

function diff(before: readonly string[], after: readonly string[]): { add?: string[]; remove?: string[] } | undefined {
  const add = after.filter((n) => !before.includes(n));
  const remove = before.filter((n) => !after.includes(n));
  if (!add.length && !remove.length) return undefined;
  return { ...(add.length ? { add } : {}), ...(remove.length ? { remove } : {}) };
}

/** The patch from conversation c to what the form holds: only what changed; null when nothing did. */
export function patchOf(c: Conversation, f: ConvFields): Parsed<ConversationPatch | null> {
  const r = readLists(f);
  if (!r.ok) return r;
  const patch: ConversationPatch = {};
  const title = f.title.trim();
  if (title !== (c.title ?? "")) patch.title = title;
  const participants = diff(c.participants ?? [], r.value.participants);
  if (participants) patch.participants = participants;
  const members = diff(c.members ?? [], r.value.members);
  if (members) patch.members = members;
  const old = (c.metadata && typeof c.metadata === "object" && !Array.isArray(c.metadata) ? c.metadata : {}) as Record<string, unknown>;
  const now = r.value.metadata ?? {};
  const md: Record<string, unknown> = {};
  for (const k of Object.keys(old)) if (!(k in now)) md[k] = null;
  for (const [k, v] of Object.entries(now)) if (JSON.stringify(old[k]) !== JSON.stringify(v)) md[k] = v;
  if (Object.keys(md).length) patch.metadata = md;
  return { ok: true, value: Object.keys(patch).length ? patch : null };
}
