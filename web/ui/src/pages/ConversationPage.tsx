import { useCallback, useEffect, useMemo, useRef, useState, useSyncExternalStore } from "react";
import { ParleyError, type ExportFormat, type LiveConversation, type LiveSnapshot, type Message, type PendingInput, type QueuedPrompt } from "@parleyhq/client";
import { Composer, type Sending } from "../components/Composer";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { ConversationForm } from "../components/ConversationForm";
import { ConversationHead } from "../components/ConversationHead";
import { ConversationSearch } from "../components/ConversationSearch";
import { FlowView } from "../components/FlowView";
import { MessageList, type MessageListHandle } from "../components/MessageList";
import { QueuePanel } from "../components/QueuePanel";
import { runnersOf, waitingOn } from "../lib/presence";
import { canWrite, refusedToken, writerId, type AuthState } from "../lib/auth";
import { fieldsOf, patchOf, type ConvFields } from "../lib/convform";
import { dispatches, turnOwners } from "../lib/flow";
import { errorText, firstLine, shortTime } from "../lib/format";
import { followPage, type FlowEvents, type FlowWindow } from "../lib/live";
import { noReplyIds } from "../lib/noreply";
import { navigate } from "../lib/route";
import { stopTarget } from "../lib/stop";
import { withStreaming } from "../lib/streaming";
import { groupRows, repliesByParent, retriedIds, rowOf } from "../lib/turns";

const idle = (): null => null;
/** A phone's screen (styles.css has the same query): the head is one line, the flow a view of its own. */
const SMALL_SCREEN = "(max-width: 600px)";
const noop = (): (() => void) => () => {};

/** Follows a conversation for as long as the page shows it: the conversation, and the flow's window of its log. */
function useLive(
  auth: AuthState,
  id: string,
  onError: (err: unknown) => void,
): { live: LiveConversation | null; snap: LiveSnapshot | null; flow: FlowWindow | null; flowSnap: FlowEvents | null } {
  const [followed, setFollowed] = useState<{ live: LiveConversation; flow: FlowWindow } | null>(null);
  const errRef = useRef(onError);
  useEffect(() => {
    errRef.current = onError;
  });
  useEffect(() => {
    const f = followPage(auth.client, id, { onError: (e) => errRef.current(e) });
    setFollowed(f);
    return () => f.close();
  }, [auth.client, id]);
  const live = followed?.live ?? null;
  const flow = followed?.flow ?? null;
  const snap = useSyncExternalStore(live?.subscribe ?? noop, live?.getSnapshot ?? idle);
  const flowSnap = useSyncExternalStore(flow?.subscribe ?? noop, flow?.getSnapshot ?? idle);
  return { live, snap, flow, flowSnap };
}

/** The page of one conversation: its head, its messages, the flow beside them, the queue and the prompt box. */
export function ConversationPage({ id, auth, search }: { id: string; auth: AuthState; search: string }) {
  const [notice, setNotice] = useState<string | null>(null);
  const report = useCallback((err: unknown) => setNotice(errorText(err)), []);
  const { live, snap, flow, flowSnap } = useLive(auth, id, report);
  const [collapsed, setCollapsed] = useState<ReadonlySet<string>>(new Set());
  const [highlighted, setHighlighted] = useState<string | null>(null);
  const [reverting, setReverting] = useState<Message | null>(null);
  const [replyTo, setReplyTo] = useState<Message | null>(null);
  // The dialog open: editing the conversation, closing it or deleting it.
  const [managing, setManaging] = useState<"edit" | "close" | "delete" | null>(null);
  const [closingNote, setClosingNote] = useState("Closed.");
  const [showFlow, setShowFlow] = useState(() => globalThis.matchMedia?.("(min-width: 1000px)").matches ?? false);
  // On a small screen the head is one line until opened, and the flow a view in place of the messages.
  const [headOpen, setHeadOpen] = useState(false);
  const onToggleHead = useCallback(() => setHeadOpen((o) => !o), []);
  const list = useRef<MessageListHandle>(null);

  const state = snap?.state;
  const messages = state?.messages;
  const streaming = state?.streaming;
  // Text a v1 runner streams before a message holds it is shown as a streaming message of its agent.
  const shown = useMemo(() => withStreaming(messages ?? [], streaming ?? [], id), [messages, streaming, id]);
  const flowEvents = flowSnap?.events;
  const owners = useMemo(() => turnOwners(flowEvents ?? []), [flowEvents]);
  const dispatched = useMemo(() => dispatches(flowEvents ?? []), [flowEvents]);
  const rows = useMemo(() => groupRows(shown, { collapsed, owners }), [shown, collapsed, owners]);
  const conversation = state?.conversation ?? null;
  const noReply = useMemo(() => noReplyIds(messages ?? [], conversation, dispatched), [messages, conversation, dispatched]);
  const retried = useMemo(() => retriedIds(messages ?? []), [messages]);
  const replies = useMemo(() => repliesByParent(messages ?? []), [messages]);
  const authors = useMemo(() => new Map((messages ?? []).map((m) => [m.id, m.agentId])), [messages]);
  const agents = useMemo(() => conversation?.participants ?? [], [conversation]);
  const title = conversation?.title || id;
  useEffect(() => {
    document.title = `${title} · Parley`;
  }, [title]);

  // Jumps: to a message held, or read older messages until it is, then scroll to it.
  const [target, setTarget] = useState<{ id: string; requestId?: string } | null>(null);
  const jump = useCallback(
    async (mid: string, requestId?: string) => {
      if (!live) return;
      setHighlighted(mid);
      const isHeld = (x: string) => live.getSnapshot().state.messages.some((m) => m.id === x);
      // The message is shown once its exchange is held from its start, and the message it replies
      // to: else its exchange would be named after whoever wrote first of what is held, and its
      // parent "an earlier message", until the older messages are read.
      try {
        const m = live.getSnapshot().state.messages.find((x) => x.id === mid) ?? (await auth.client.message(id, mid));
        const around = [m.turnId, m.replyTo].filter((x): x is string => !!x && x !== mid && !isHeld(x));
        const seqs = await Promise.all(
          around.map((x) =>
            auth.client.message(id, x).then(
              (r) => r.seq,
              () => m.seq, // reverted meanwhile: nothing to read for it
            ),
          ),
        );
        const from = Math.min(m.seq, ...seqs);
        if (!isHeld(mid) || seqs.length > 0) await live.loadUntil(from);
      } catch (err) {
        setNotice(err instanceof ParleyError && err.code === "not_found" ? "That message is gone (reverted)." : errorText(err));
        return;
      }
      const m = live.getSnapshot().state.messages.find((x) => x.id === mid);
      if (!m) {
        setNotice("That message is gone (reverted).");
        return;
      }
      setCollapsed((c) => (c.has(m.turnId) ? new Set([...c].filter((t) => t !== m.turnId)) : c));
      setTarget(requestId ? { id: mid, requestId } : { id: mid });
    },
    [live, auth.client, id],
  );
  const reached = useRef<{ id: string; requestId?: string } | null>(null);
  useEffect(() => {
    if (!target || reached.current === target) return;
    const i = rowOf(rows, target.id);
    if (i >= 0) {
      list.current?.scrollToRow(i, target.requestId);
      reached.current = target;
    }
  }, [rows, target]);

  // ?m=ID opens the page at a message.
  const opened = useRef(false);
  useEffect(() => {
    const mid = new URLSearchParams(search).get("m");
    if (!opened.current && mid && live && state?.position) {
      opened.current = true;
      void jump(mid);
    }
  }, [search, live, state?.position, jump]);

  const onToggle = useCallback((turnId: string) => {
    setCollapsed((c) => {
      const n = new Set(c);
      if (n.has(turnId)) n.delete(turnId);
      else n.add(turnId);
      return n;
    });
  }, []);
  const onLoadOlder = useCallback(() => {
    live?.loadOlder().catch(report);
  }, [live, report]);
  const onFetch = useCallback(
    (mid: string) => {
      live?.fetchMessage(mid).catch(report);
    },
    [live, report],
  );
  const onRevert = useCallback((m: Message) => setReverting(m), []);
  const onJump = useCallback(
    (mid: string) => {
      // Where the flow is a view of its own, a jump to a message shows the messages.
      if (globalThis.matchMedia?.(SMALL_SCREEN).matches) setShowFlow(false);
      void jump(mid);
    },
    [jump],
  );
  const onEarlier = useCallback(() => void flow?.loadEarlier(), [flow]);
  const onJumpInput = useCallback(
    (pi: PendingInput) => {
      if (globalThis.matchMedia?.(SMALL_SCREEN).matches) setShowFlow(false);
      void jump(pi.messageId, pi.requestId);
    },
    [jump],
  );

  const writer = writerId(auth);
  const queue = state?.queue;
  // Stop shows only while an answer streams, and stops that answer's prompt, by name.
  const stopping = useMemo(() => stopTarget(queue?.prompts, shown), [queue, shown]);
  const answering = stopping !== undefined;

  const act = async (what: () => Promise<unknown>): Promise<boolean> => {
    try {
      await what();
      return true;
    } catch (err) {
      setNotice(errorText(err));
      return false;
    }
  };
  const onSend = async (content: string, how: Sending) => {
    const as = writer ? { agentId: writer } : {};
    if (how.kind === "prompt") return act(() => auth.client.prompt(id, { content, mode: how.mode, ...(how.to ? { to: how.to } : {}), ...as }));
    // A person's message is a turn of its own: it ends its turn, and the floor passes on.
    const sent = await act(() => auth.client.postMessage(id, { content, role: "user", finality: "turn", ...(how.replyTo ? { replyTo: how.replyTo } : {}), ...as }));
    if (sent) setReplyTo(null);
    return sent;
  };
  const onReply = useCallback((m: Message) => setReplyTo(m), []);
  const onCancelReply = useCallback(() => setReplyTo(null), []);
  const onStop = () => {
    if (stopping) void act(() => auth.client.stop(id, { promptId: stopping }));
  };
  const onWithdraw = useCallback((pid: string) => void act(() => auth.client.withdrawPrompt(id, pid, writer ? { agentId: writer } : {})), [auth.client, id, writer]);
  const onPromote = useCallback((pid: string) => void act(() => auth.client.promotePrompt(id, pid, writer ? { agentId: writer } : {})), [auth.client, id, writer]);
  const me = auth.identity.kind === "agent" ? auth.identity.agentId : writer;
  const admin = auth.identity.kind === "open" || auth.identity.kind === "admin";
  // An answer is sent as the page's person on an open server or with an admin token (as prompts are);
  // the fold shows it once the server wrote it (input.answered).
  const onAnswer = useCallback(
    async (_mid: string, rid: string, answer: unknown) => {
      await auth.client.answerInput(id, rid, answer, writer ? { agentId: writer } : {});
    },
    [auth.client, id, writer],
  );
  const canChange = useCallback((q: QueuedPrompt) => admin || q.agentId === me, [admin, me]);
  // Who may change the conversation: its owner and admins; delete it: admins.
  const canEdit = admin || (!!me && conversation?.createdBy === me);

  const saveEdit = async (f: ConvFields) => {
    if (!conversation) return { ok: false as const, error: "The conversation is not read yet." };
    const r = patchOf(conversation, f);
    if (!r.ok) return r;
    if (r.value) {
      try {
        await auth.client.updateConversation(id, r.value);
      } catch (err) {
        return { ok: false as const, error: errorText(err) };
      }
    }
    setManaging(null);
    return { ok: true as const };
  };
  const doClose = async () => {
    setManaging(null);
    await act(() => auth.client.postMessage(id, { content: closingNote.trim() || "Closed.", role: "user", finality: "conversation", ...(writer ? { agentId: writer } : {}) }));
  };
  const doDelete = async () => {
    setManaging(null);
    if (await act(() => auth.client.deleteConversation(id))) navigate("/");
  };

  const doRevert = async (m: Message) => {
    setReverting(null);
    await act(() => auth.client.revert(id, { messageId: m.id, ...(writer ? { agentId: writer } : {}) }));
  };

  const download = async (format: ExportFormat) => {
    await act(async () => {
      const blob = await auth.client.exportConversation(id, format);
      const url = URL.createObjectURL(blob);
      const a = document.createElement("a");
      a.href = url;
      a.download = `${id}.${format === "markdown" ? "md" : format}`;
      document.body.append(a);
      a.click();
      a.remove();
      setTimeout(() => URL.revokeObjectURL(url), 10_000);
    });
  };

  // Why following stopped for good (the conversation is gone, the token refused).
  const halted = snap?.status.state === "stopped" ? snap.status.error : null;
  // A stream the server ended as unauthorized (the token was revoked) asks for another token, as a 401 does.
  const stoppedCode = halted?.code;
  useEffect(() => {
    if (stoppedCode === "unauthorized") refusedToken(auth.token);
  }, [stoppedCode, auth.token]);

  const stopped = halted
    ? halted.code === "not_found"
      ? "This conversation does not exist (or was deleted)."
      : halted.code === "unauthorized"
        ? "The server wants a token to show this conversation."
        : halted.message
    : null;
  const writable = canWrite(auth) && !state?.head?.closed && !halted;
  const later = reverting && messages ? messages.filter((m) => m.seq > reverting.seq).length : 0;

  // Screen readers hear of each new message once, not of every text delta (the log itself is not live).
  const newest = messages?.[messages.length - 1];
  const announcement = newest ? `Message from ${newest.agentId} at ${shortTime(newest.createdAt)}` : "";

  if (halted && !state?.position) {
    // Refused before anything was shown: nothing of the conversation to draw.
    return (
      <main className="missing">
        <h1>{halted.code === "forbidden" ? "This conversation is not open to you" : halted.code === "not_found" ? "No such conversation" : "This conversation cannot be shown"}</h1>
        <p role="alert">{stopped}</p>
        <p>
          <a
            href="/"
            onClick={(e) => {
              e.preventDefault();
              navigate("/");
            }}
          >
            See the conversations
          </a>
          .
        </p>
      </main>
    );
  }

  return (
    <main className={`conv${headOpen ? " head-open" : ""}`} aria-busy={!state?.position}>
      <div className="sr-only" aria-live="polite">
        {announcement}
      </div>
      <div className="conv-top">
        <button type="button" className="linkish back" onClick={() => navigate("/")}>
          ← Conversations
        </button>
        <ConversationSearch client={auth.client} id={id} onJump={onJump} />
        <div className="conv-tools">
          <button type="button" className="export" onClick={() => void download("markdown")}>
            Export Markdown
          </button>
          <button type="button" className="export" onClick={() => void download("json")}>
            Export JSON
          </button>
          {canEdit && conversation && (
            <button type="button" className="manage" onClick={() => setManaging("edit")}>
              Edit
            </button>
          )}
          {writable && (
            <button type="button" className="manage" onClick={() => setManaging("close")}>
              Close
            </button>
          )}
          {admin && (
            <button type="button" className="manage danger-text" onClick={() => setManaging("delete")}>
              Delete
            </button>
          )}
          <button type="button" className="flow-toggle" aria-expanded={showFlow} aria-controls="flow-panel" onClick={() => setShowFlow((s) => !s)}>
            {showFlow ? "Hide flow" : "Show flow"}
          </button>
        </div>
      </div>
      <ConversationHead
        conversation={conversation}
        head={state?.head ?? null}
        guidance={state?.guidance ?? null}
        status={snap?.status ?? { state: "connecting", attempt: 0 }}
        stopped={stopped}
        waiting={waitingOn(state?.head ?? null, state?.guidance ?? null, queue?.known ? queue.prompts : undefined)}
        lastSeq={state?.position?.seq ?? 0}
        onJumpInput={onJumpInput}
        open={headOpen}
        onToggleOpen={onToggleHead}
      />
      {notice && (
        <div className="notice" role="alert">
          <span>{notice}</span>
          <button type="button" className="icon-button" aria-label="Dismiss" onClick={() => setNotice(null)}>
            ×
          </button>
        </div>
      )}
      <div className={`conv-body${showFlow ? " with-flow" : ""}`}>
        <div className="conv-main">
          <MessageList
            ref={list}
            rows={rows}
            noReply={noReply}
            retried={retried}
            replies={replies}
            authors={authors}
            highlighted={highlighted}
            canRevert={writable}
            canReply={writable}
            canAnswer={canWrite(auth) && !halted}
            me={auth.identity.kind === "agent" ? auth.identity.agentId : undefined}
            onAnswer={onAnswer}
            olderLoading={snap?.older.loading ?? false}
            olderDone={snap?.older.done ?? false}
            onLoadOlder={onLoadOlder}
            onToggle={onToggle}
            onJump={onJump}
            onRevert={onRevert}
            onReply={onReply}
            onFetch={onFetch}
          />
          <QueuePanel prompts={queue?.prompts ?? []} known={queue?.known ?? false} runners={runnersOf(state?.guidance ?? null)} guidance={state?.guidance ?? null} canChange={canChange} onWithdraw={onWithdraw} onPromote={onPromote} />
          <Composer
            disabled={!writable}
            answering={answering}
            agents={agents}
            runners={runnersOf(state?.guidance ?? null)}
            floor={state?.head?.openTurn && state.head.openTurn.owner !== me && !state.head.openTurn.delegates?.includes(me ?? "") ? state.head.openTurn.owner : null}
            replyTo={replyTo}
            onCancelReply={onCancelReply}
            onSend={onSend}
            onStop={onStop}
            note={state?.head?.closed ? "The conversation is closed." : auth.identity.kind === "viewer" ? "A viewer token reads only." : "You cannot write here."}
          />
          {writer && <p className="composer-note">You write as {writer}.</p>}
        </div>
        <aside id="flow-panel" className="flow-panel" aria-label="Flow">
          {showFlow && (
            <FlowView
              events={flowEvents ?? []}
              agents={agents}
              after={flowSnap?.after ?? 0}
              loading={flowSnap?.loading ?? false}
              onEarlier={onEarlier}
              onJump={onJump}
            />
          )}
        </aside>
      </div>
      {managing === "edit" && conversation && (
        <ConversationForm title="Edit the conversation" submit="Save" creating={false} initial={fieldsOf(conversation)} onSubmit={saveEdit} onCancel={() => setManaging(null)} />
      )}
      {managing === "close" && (
        <ConfirmDialog title="Close this conversation?" confirm="Close it" onConfirm={() => void doClose()} onCancel={() => setManaging(null)}>
          <p>Nobody can write in it afterwards; it can still be read, searched and exported.</p>
          <label className="form-field">
            <span>Closing note</span>
            <input value={closingNote} onChange={(e) => setClosingNote(e.target.value)} maxLength={2000} />
          </label>
        </ConfirmDialog>
      )}
      {managing === "delete" && (
        <ConfirmDialog title="Delete this conversation?" confirm="Delete it" onConfirm={() => void doDelete()} onCancel={() => setManaging(null)}>
          <p>
            This deletes “{title}” and its whole log, for everyone. It cannot be undone: export it first to keep a copy.
          </p>
        </ConfirmDialog>
      )}
      {reverting && (
        <ConfirmDialog title="Revert from this message?" confirm="Revert" onConfirm={() => void doRevert(reverting)} onCancel={() => setReverting(null)}>
          <p>
            This removes the message of {reverting.agentId} ({firstLine(reverting.content, 60) || "no text"})
            {later > 0 ? ` and the ${later} ${later === 1 ? "message" : "messages"} after it` : ""}. The log keeps a record of the revert.
          </p>
        </ConfirmDialog>
      )}
    </main>
  );
}
