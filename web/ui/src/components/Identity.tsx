import { useState } from "react";
import { DEFAULT_PERSON, setPerson, signIn, signOut, type AuthState } from "../lib/auth";

/** What the page's identity may do, the person it writes as, and the sign-out button. */
export function IdentityBar({ auth }: { auth: AuthState }) {
  const id = auth.identity;
  const [person, setDraft] = useState(auth.person);
  const writesAsPerson = id.kind === "open" || id.kind === "admin";
  let what: string;
  switch (id.kind) {
    case "checking":
      what = "…";
      break;
    case "open":
      what = "Open server (no tokens)";
      break;
    case "admin":
      what = "Admin token";
      break;
    case "agent":
      what = `Agent token: ${id.agentId}`;
      break;
    case "viewer":
      what = "Viewer token: reads only";
      break;
    case "none":
      what = "No token";
      break;
  }
  return (
    <div className="identity">
      <span className="identity-kind">{what}</span>
      {writesAsPerson && (
        <form
          className="person"
          onSubmit={(e) => {
            e.preventDefault();
            setPerson(person);
          }}
        >
          <label>
            <span>writing as</span>
            <input
              aria-label="Write as"
              value={person}
              size={8}
              onChange={(e) => setDraft(e.target.value)}
              onBlur={() => setPerson(person)}
              placeholder={DEFAULT_PERSON}
            />
          </label>
        </form>
      )}
      {auth.token && (
        <button type="button" className="linkish" onClick={() => void signOut()}>
          Sign out
        </button>
      )}
    </div>
  );
}

/** Asks for a token to sign the browser in with, when the server wants one. */
export function TokenForm({ refused, error }: { refused: boolean; error?: string | undefined }) {
  const [token, setToken] = useState("");
  return (
    <main className="token-page">
      <form
        className="token-form"
        onSubmit={(e) => {
          e.preventDefault();
          if (token.trim()) void signIn(token);
        }}
      >
        <h1>This server wants a token</h1>
        {(refused || error) && (
          <p role="alert">{refused ? "The server refused the token given (unknown or revoked)." : error}</p>
        )}
        <p>
          Paste a token made with <code>parley token create</code> (or by an admin on the Tokens page). It signs this browser in, in every
          tab, until you sign out or close the browser: the server keeps it in a cookie that no script of a page can read.
        </p>
        <label htmlFor="token">Token</label>
        <input id="token" type="password" autoComplete="off" value={token} onChange={(e) => setToken(e.target.value)} autoFocus />
        <button type="submit" className="primary" disabled={!token.trim()}>
          Sign in
        </button>
      </form>
    </main>
  );
}
