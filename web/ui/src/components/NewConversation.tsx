import { useState } from "react";
import { canWrite, writerId, type AuthState } from "../lib/auth";
import { fieldsOf, newConversationOf, type ConvFields } from "../lib/convform";
import { errorText } from "../lib/format";
import { conversationPath, navigate } from "../lib/route";
import { ConversationForm, type Outcome } from "./ConversationForm";

/**
 * The "New conversation" button and its form: makes the conversation and
 * opens its page. The person the page writes as is a participant by
 * default (they can take it out).
 */
export function NewConversation({ auth }: { auth: AuthState }) {
  const [open, setOpen] = useState(false);
  if (!canWrite(auth) || auth.identity.kind === "checking") return null;
  const me = auth.identity.kind === "agent" ? auth.identity.agentId : writerId(auth);
  const create = async (f: ConvFields): Promise<Outcome> => {
    const r = newConversationOf(f);
    if (!r.ok) return r;
    try {
      const view = await auth.client.createConversation(r.value);
      setOpen(false);
      navigate(conversationPath(view.conversation.id));
      return { ok: true };
    } catch (err) {
      return { ok: false, error: errorText(err) };
    }
  };
  return (
    <>
      <button type="button" className="primary new-conversation" onClick={() => setOpen(true)}>
        New conversation
      </button>
      {open && <ConversationForm title="New conversation" submit="Create" creating initial={{ ...fieldsOf(), participants: me ?? "" }} onSubmit={create} onCancel={() => setOpen(false)} />}
    </>
  );
}
