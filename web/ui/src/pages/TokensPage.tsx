// The tokens' page, for an admin (or an open server): the tokens (never
// their secrets), a form to make one, whose secret is shown once with a
// Copy button, and Revoke, after a confirmation.

import { ParleyError, type ParleyClient, type Token } from "@parleyhq/client";
import { useEffect, useRef, useState } from "react";
import { ConfirmDialog } from "../components/ConfirmDialog";
import { canManage, signIn, type AuthState } from "../lib/auth";

type Kind = Token["kind"];

const KIND_LABEL: Record<Kind, string> = { admin: "Admin", agent: "Agent", viewer: "Viewer" };

function when(t: string | null): string {
  return t ? new Date(t).toLocaleString() : "";
}

function message(err: unknown): string {
  return err instanceof ParleyError ? err.message : err instanceof Error ? err.message : String(err);
}

/** The tokens' page. */
export function TokensPage({ auth }: { auth: AuthState }) {
  const [tokens, setTokens] = useState<Token[] | null>(null);
  const [error, setError] = useState("");
  const [made, setMade] = useState<Token | null>(null);
  const [revoking, setRevoking] = useState<Token | null>(null);
  const heading = useRef<HTMLHeadingElement>(null);
  const client = auth.client;
  const allowed = canManage(auth);

  // Bumped to read the list again.
  const [reads, setReads] = useState(0);
  const load = () => setReads((n) => n + 1);

  useEffect(() => {
    document.title = "Tokens — Parley";
    if (!allowed) return;
    let live = true;
    client.tokens().then(
      (ts) => {
        if (!live) return;
        setTokens(ts);
        setError("");
      },
      (err: unknown) => live && setError(message(err)),
    );
    return () => {
      live = false;
    };
  }, [allowed, client, reads]);

  if (!allowed) {
    return (
      <main className="tokens-page">
        <h1>Tokens</h1>
        <p>Only an admin token may manage tokens.</p>
      </main>
    );
  }

  const revoke = async (t: Token) => {
    setRevoking(null);
    try {
      await client.revokeToken(t.id);
      load();
    } catch (err) {
      setError(message(err));
    }
    heading.current?.focus();
  };

  return (
    <main className="tokens-page">
      <h1 ref={heading} tabIndex={-1}>
        Tokens
      </h1>
      <CreateToken
        client={client}
        open={auth.identity.kind === "open"}
        onMade={async (t) => {
          setMade(t);
          if (auth.identity.kind === "open") {
            // The first token ends open mode: an admin one signs this browser in.
            if (t.kind === "admin" && t.token) await signIn(t.token);
            return;
          }
          load();
        }}
      />
      {made?.token && <NewSecret token={made} onDone={() => setMade(null)} />}
      {error && <p role="alert">{error}</p>}
      <section aria-labelledby="tokens-list">
        <h2 id="tokens-list">All tokens</h2>
        {tokens === null ? (
          <p>Loading…</p>
        ) : tokens.length === 0 ? (
          <p>No tokens yet.</p>
        ) : (
          <div className="tokens-table">
            <table>
              <thead>
                <tr>
                  <th scope="col">Kind</th>
                  <th scope="col">Agent</th>
                  <th scope="col">Label</th>
                  <th scope="col">Created</th>
                  <th scope="col">Id</th>
                  <th scope="col">
                    <span className="sr-only">State</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {tokens.map((t) => (
                  <tr key={t.id} className={t.revokedAt ? "revoked" : undefined}>
                    <td>{KIND_LABEL[t.kind]}</td>
                    <td>{t.agentId ?? ""}</td>
                    <td>{t.name ?? ""}</td>
                    <td>{when(t.createdAt)}</td>
                    <td>
                      <code>{t.id}</code>
                    </td>
                    <td>
                      {t.revokedAt ? (
                        `Revoked ${when(t.revokedAt)}`
                      ) : (
                        <button type="button" className="danger" onClick={() => setRevoking(t)} aria-label={`Revoke ${describe(t)}`}>
                          Revoke
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>
      {revoking && (
        <ConfirmDialog title="Revoke this token?" confirm="Revoke" onConfirm={() => void revoke(revoking)} onCancel={() => setRevoking(null)}>
          <p>
            {describe(revoking)} stops working at once: every page and program signed in with it loses access, and its streams end. This
            cannot be undone.
          </p>
        </ConfirmDialog>
      )}
    </main>
  );
}

/** A token's name for people: its kind, agent and label. */
function describe(t: Token): string {
  return [KIND_LABEL[t.kind] + " token", t.agentId, t.name && `“${t.name}”`].filter(Boolean).join(" ") + ` (${t.id.slice(-8)})`;
}

/** The form that makes a token. */
function CreateToken({ client, open, onMade }: { client: ParleyClient; open: boolean; onMade: (t: Token) => Promise<void> }) {
  const [kind, setKind] = useState<Kind>("agent");
  const [agentId, setAgentId] = useState("");
  const [name, setName] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState("");
  const make = async () => {
    setBusy(true);
    setError("");
    try {
      const body = { kind, ...(kind === "agent" ? { agentId: agentId.trim() } : {}), ...(name.trim() ? { name: name.trim() } : {}) };
      const t = await client.createToken(body);
      setAgentId("");
      setName("");
      await onMade(t);
    } catch (err) {
      setError(message(err));
    } finally {
      setBusy(false);
    }
  };
  return (
    <form
      className="token-create"
      aria-labelledby="token-create-title"
      onSubmit={(e) => {
        e.preventDefault();
        void make();
      }}
    >
      <h2 id="token-create-title">New token</h2>
      {open && <p>This server runs open. Making a token ends that: from then on every request needs a token.</p>}
      <div className="token-fields">
        <label>
          <span>Kind</span>
          <select value={kind} onChange={(e) => setKind(e.target.value as Kind)}>
            <option value="agent">Agent: writes as one agent</option>
            <option value="viewer">Viewer: reads only</option>
            <option value="admin">Admin: everything</option>
          </select>
        </label>
        {kind === "agent" && (
          <label>
            <span>Agent id</span>
            <input value={agentId} onChange={(e) => setAgentId(e.target.value)} required maxLength={128} autoComplete="off" />
          </label>
        )}
        <label>
          <span>Label (optional)</span>
          <input value={name} onChange={(e) => setName(e.target.value)} maxLength={256} autoComplete="off" />
        </label>
        <button type="submit" className="primary" disabled={busy || (kind === "agent" && !agentId.trim())}>
          Create token
        </button>
      </div>
      {error && <p role="alert">{error}</p>}
    </form>
  );
}

/** A new token's secret, shown this once, with a Copy button. */
function NewSecret({ token, onDone }: { token: Token; onDone: () => void }) {
  const [copied, setCopied] = useState("");
  const region = useRef<HTMLElement>(null);
  useEffect(() => {
    region.current?.focus();
  }, [token]);
  return (
    <section className="new-secret" ref={region} tabIndex={-1} aria-labelledby="new-secret-title">
      <h2 id="new-secret-title">New {KIND_LABEL[token.kind].toLowerCase()} token</h2>
      <p>Copy the secret now: it will not be shown again.</p>
      <div className="secret-row">
        <input readOnly value={token.token ?? ""} aria-label="Secret" onFocus={(e) => e.currentTarget.select()} />
        <button
          type="button"
          onClick={() => {
            navigator.clipboard.writeText(token.token ?? "").then(
              () => setCopied("Copied"),
              () => setCopied("Could not copy: select the secret and copy it yourself."),
            );
          }}
        >
          Copy
        </button>
        <button type="button" onClick={onDone}>
          Done
        </button>
      </div>
      <p role="status" className="copied">
        {copied}
      </p>
    </section>
  );
}
