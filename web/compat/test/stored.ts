// What the server stored, read over HTTP, and the projections the tests
// compare: a UI message's parts and a stored message's parts, each as
// {text} or {tool} entries, in order.

import { inject } from "vitest";

/** A stored Parley message, as far as the tests read it. */
export interface Stored {
  id: string;
  role: string;
  content: string;
  status: string;
  parts: { type: string; text?: string; callId?: string; toolName?: string; status?: string; args?: unknown; result?: unknown; error?: string }[];
}

export const url = (): string => inject("serverUrl");
export const admin = (): string => inject("adminToken");
export const you = (): string => inject("youToken");

/** GET as the admin; the JSON body. */
export async function get<T>(path: string): Promise<T> {
  const r = await fetch(url() + path, { headers: { Authorization: "Bearer " + admin() } });
  if (!r.ok) throw new Error(`GET ${path}: ${r.status} ${await r.text()}`);
  return (await r.json()) as T;
}

export const stored = (conversation: string, id: string): Promise<Stored> =>
  get<Stored>(`/v1/conversations/${encodeURIComponent(conversation)}/messages/${encodeURIComponent(id)}`);

/** One part as the tests compare it. */
export type Seen =
  | { text: string }
  | { tool: string; callId: string; state: string; input: unknown; output: unknown };

/** A stored message's parts, as a UI message should show them. */
export function storedParts(m: Stored): Seen[] {
  const out: Seen[] = [];
  for (const p of m.parts) {
    if (p.type === "text") out.push({ text: p.text ?? "" });
    if (p.type === "tool-call") {
      const done = p.status === "completed";
      out.push({ tool: p.toolName ?? "", callId: p.callId ?? "", state: done ? "output-available" : "output-error", input: p.args ?? {}, output: done ? p.result : p.error });
    }
  }
  return out;
}

/** A UI message's parts (the AI SDK's), in the same form. */
export function uiParts(m: { parts: Record<string, unknown>[] }): Seen[] {
  return m.parts.map((p) => {
    const type = p["type"] as string;
    if (type === "text") return { text: p["text"] as string };
    if (type.startsWith("tool-")) {
      const state = p["state"] as string;
      return { tool: type.slice(5), callId: p["toolCallId"] as string, state, input: p["input"], output: state === "output-error" ? p["errorText"] : p["output"] };
    }
    return { text: `(a part of type ${type})` };
  });
}

/** A new id for a chat or thread. */
export function newId(prefix: string): string {
  return prefix + "-" + Math.random().toString(36).slice(2, 10);
}
