// A chat page on Parley with the AI SDK's useChat. The chat's id is a
// Parley conversation (made by the first question); the page reads what
// the conversation already holds, and `resume: true` picks up an answer
// still being written, from Parley's log: a reload mid-answer shows the
// answer once, as it goes on.
//
// The page's query: ?chat=ID (made, and put in the address, if missing),
// &to=AGENT (the agent asked; "helper" by default), &as=AGENT (who asks,
// on a server without tokens; "you" by default). VITE_PARLEY_TOKEN, when
// set at build time, is an agent token for the person asking.

import { useChat } from "@ai-sdk/react";
import { groupRetries } from "@parleyhq/client";
import { DefaultChatTransport, type UIMessage } from "ai";
import { useEffect, useMemo, useState, type FormEvent } from "react";

const query = new URLSearchParams(location.search);
const to = query.get("to") ?? "helper";
const asker = query.get("as") ?? "you";
const token = (import.meta.env["VITE_PARLEY_TOKEN"] as string | undefined) ?? "";
const headers: Record<string, string> = token ? { Authorization: "Bearer " + token } : {};

/** The chat's id: from the address, or a new one put there. */
function chatId(): string {
  let id = query.get("chat");
  if (!id) {
    id = "chat-" + crypto.randomUUID();
    query.set("chat", id);
    history.replaceState(null, "", "?" + query.toString());
  }
  return id;
}

/** A Parley message, as far as the page shows it. */
interface ParleyMessage {
  id: string;
  role: string;
  status: string;
  retryOf?: string;
  parts: { type: string; text?: string; callId?: string; toolName?: string; status?: string; args?: unknown; result?: unknown; error?: string }[];
}

/**
 * The messages the conversation holds, as UI messages: every question, and
 * every answer that has ended. An answer still being written is left out:
 * resuming replays it from its start. The attempts of an answer whose
 * runner failed over (each retry names the attempt it retries) are one
 * answer, as the chat stream shows them: the first attempt's parts, then
 * the retry's, under the first attempt's id (`groupRetries`).
 */
async function storedMessages(id: string): Promise<UIMessage[]> {
  const r = await fetch(`/v1/conversations/${encodeURIComponent(id)}/messages?limit=1000`, { headers });
  if (r.status === 404) return []; // a new chat: its first question makes it
  if (!r.ok) throw new Error(`reading the chat: ${r.status} ${await r.text()}`);
  const { messages } = (await r.json()) as { messages: ParleyMessage[] };
  const answers = groupRetries(messages.filter((m) => m.role === "user" || m.role === "assistant"));
  return answers
    .filter((all) => all.every((m) => m.status !== "streaming"))
    .map((all) => ({ id: all[0]!.id, role: all[0]!.role as "user" | "assistant", parts: all.flatMap((a) => a.parts.flatMap(uiPart)) }));
}

/** A stored part as a UI message part (tool calls ran on the runner's side). */
function uiPart(p: ParleyMessage["parts"][number]): UIMessage["parts"] {
  if (p.type === "text") return [{ type: "text", text: p.text ?? "", state: "done" }];
  if (p.type !== "tool-call") return [];
  const type: `tool-${string}` = `tool-${p.toolName ?? ""}`;
  const base = { type, toolCallId: p.callId ?? "", input: p.args ?? {}, providerExecuted: true };
  return [p.status === "completed" ? { ...base, state: "output-available", output: p.result } : { ...base, state: "output-error", errorText: p.error ?? "failed" }];
}

export function App() {
  const [id] = useState(chatId);
  const [initial, setInitial] = useState<UIMessage[] | null>(null);
  const [failed, setFailed] = useState("");
  useEffect(() => {
    storedMessages(id).then(setInitial, (e: unknown) => setFailed(String(e)));
  }, [id]);
  if (failed) return <main role="alert">{failed}</main>;
  if (!initial) return <main className="status">Loading…</main>;
  return <Chat id={id} initial={initial} />;
}

/** The data of Parley's transient `data-parley-status` part. */
interface ParleyStatus {
  state: string;
  waitingOn?: { reason: string; agentId?: string };
}

/** What the page says of a question's status, or null once a runner has it. */
function waitingText(s: ParleyStatus): string | null {
  const w = s.waitingOn;
  if (s.state !== "queued" || !w) return null;
  if (w.reason === "runner") return `Waiting for a runner of ${w.agentId ?? to} to connect…`;
  return w.agentId ? `Waiting (${w.reason} of ${w.agentId})…` : `Waiting (${w.reason})…`;
}

function Chat({ id, initial }: { id: string; initial: UIMessage[] }) {
  const transport = useMemo(
    () =>
      new DefaultChatTransport({
        api: "/v1/chat",
        headers,
        // Only the question is needed: Parley holds the rest of the chat.
        prepareSendMessagesRequest: ({ id, messages, trigger, messageId }) => ({
          body: { id, messages: messages.slice(-1), trigger, messageId, to, ...(token ? {} : { agentId: asker }) },
        }),
      }),
    [],
  );
  // While a question waits (no runner of the agent is connected, or it
  // waits its turn), Parley says so in a transient status part.
  const [waiting, setWaiting] = useState<string | null>(null);
  const { messages, sendMessage, status, stop, error } = useChat({
    id,
    messages: initial,
    resume: true,
    transport,
    onData: (part) => {
      if (part.type === "data-parley-status") setWaiting(waitingText(part.data as ParleyStatus));
    },
  });
  const [input, setInput] = useState("");
  const busy = status === "submitted" || status === "streaming";

  const submit = (e: FormEvent) => {
    e.preventDefault();
    if (!input.trim()) return;
    void sendMessage({ text: input });
    setInput("");
  };
  // Closing the connection leaves the answer going (a reload resumes it);
  // stopping it is asking Parley to, naming the question asked (its id is
  // the prompt's), so that only its answer is stopped.
  const halt = () => {
    void stop();
    const asked = messages.filter((m) => m.role === "user").at(-1);
    void fetch(`/v1/conversations/${encodeURIComponent(id)}/abort`, {
      method: "POST",
      headers: { ...headers, "Content-Type": "application/json" },
      body: JSON.stringify(asked ? { promptId: asked.id } : {}),
    });
  };

  return (
    <main>
      <h1>Chat with {to}</h1>
      {messages.map((m) => (
        <div key={m.id} className={"msg " + m.role} data-message-id={m.id} data-role={m.role}>
          <div className="who">{m.role === "user" ? asker : to}</div>
          {m.parts.map((p, i) => {
            if (p.type === "text") return <div key={i} className="text">{p.text}</div>;
            if (p.type.startsWith("tool-") && "state" in p) {
              return <div key={i} className="tool">{p.type.slice(5)}: {p.state}</div>;
            }
            return null;
          })}
        </div>
      ))}
      {error && <p role="alert">{error.message}</p>}
      {status === "submitted" && waiting && (
        <p className="waiting" role="status">
          {waiting}
        </p>
      )}
      <p className="status" data-status={status}>{status}</p>
      <form onSubmit={submit}>
        <input value={input} onChange={(e) => setInput(e.target.value)} placeholder="Ask…" aria-label="Question" />
        {busy ? <button type="button" onClick={halt}>Stop</button> : <button type="submit">Send</button>}
      </form>
    </main>
  );
}
