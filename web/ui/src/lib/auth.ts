// Who the page is: whether the browser is signed in (the token lives in an
// HttpOnly cookie the server set, which no script reads; see
// docs/security.md), what that token may do, and the person it writes as on
// an open server or with an admin token (kept in localStorage; `you` by
// default). The page talks only to the server that served it. Every tab of
// the browser shares the sign-in.

import { ParleyClient, ParleyError, type FetchLike } from "@parleyhq/client";

/** What the page's identity may do. */
export type Identity =
  | { kind: "checking" }
  /** No token, and the server runs open: every request acts as an admin. */
  | { kind: "open" }
  | { kind: "admin" }
  /** An agent token: reads, and writes as its agent. */
  | { kind: "agent"; agentId: string }
  /** A viewer token: reads only. */
  | { kind: "viewer" }
  /**
   * The server wants a token (none was given, or it refused the one
   * given); `error` says why a sign-in failed otherwise (too many tries).
   */
  | { kind: "none"; refused: boolean; error?: string };

export interface AuthState {
  /**
   * The name of the browser's sign-in, or null when there is none: pages
   * key on it, so that they start again when it changes. Never the secret,
   * which only the HttpOnly cookie holds.
   */
  readonly token: string | null;
  readonly identity: Identity;
  /** The agent the page writes as where the token does not say (open mode, admin). */
  readonly person: string;
  readonly client: ParleyClient;
}

/** Where an older page kept its token (sessionStorage): moved to the cookie once, then deleted. */
const OLD_TOKEN_KEY = "parley.token";
const PERSON_KEY = "parley.person";
export const DEFAULT_PERSON = "you";
/** The header and the cookie of the CSRF proof (see docs/security.md). */
const CSRF_HEADER = "X-Parley-CSRF";
const CSRF_COOKIE = "parley_csrf";

function read(storage: "sessionStorage" | "localStorage", key: string): string | null {
  try {
    return globalThis[storage]?.getItem(key) ?? null;
  } catch {
    return null;
  }
}

function write(storage: "sessionStorage" | "localStorage", key: string, value: string | null): void {
  try {
    if (value === null) globalThis[storage]?.removeItem(key);
    else globalThis[storage]?.setItem(key, value);
  } catch {
    // storage refused (private mode): the value lives as long as the page
  }
}

/** The session's CSRF proof, from its (readable) cookie; "" if none. */
export function csrfProof(): string {
  for (const part of (globalThis.document?.cookie ?? "").split(";")) {
    const [name, ...rest] = part.trim().split("=");
    if (name === CSRF_COOKIE) return rest.join("=");
  }
  return "";
}

/** The fetch of the page: every write carries the CSRF proof, and a 401 means the server wants a (another) token. */
function pageFetch(token: string | null): FetchLike {
  return async (input, init = {}) => {
    const method = (init.method ?? "GET").toUpperCase();
    if (method !== "GET" && method !== "HEAD") {
      const proof = csrfProof();
      if (proof) {
        const headers = new Headers(init.headers);
        headers.set(CSRF_HEADER, proof);
        init = { ...init, headers };
      }
    }
    const res = await globalThis.fetch(input, { ...init, credentials: "same-origin" });
    if (res.status === 401) refusedToken(token);
    return res;
  };
}

const listeners = new Set<() => void>();
let signIns = 0;
let state: AuthState = make(null, read("localStorage", PERSON_KEY) ?? DEFAULT_PERSON, { kind: "checking" });

function make(token: string | null, person: string, identity: Identity): AuthState {
  return { token, person, identity, client: new ParleyClient({ fetch: pageFetch(token) }) };
}

/**
 * Notes that the server refused the sign-in named `token` (a 401, or a
 * stream it ended as unauthorized, as when the token is revoked): the page
 * clears the cookie and asks for another.
 */
export function refusedToken(token: string | null): void {
  if (state.token !== token || state.identity.kind === "none") return;
  setState({ token: null, identity: { kind: "none", refused: token !== null } });
  if (token !== null) void endSession();
}

function setState(p: Partial<Omit<AuthState, "client">>): void {
  const token = p.token !== undefined ? p.token : state.token;
  const person = p.person ?? state.person;
  const identity = p.identity ?? state.identity;
  state = token !== state.token ? make(token, person, identity) : { ...state, person, identity };
  for (const l of [...listeners]) l();
}

/** The identity now (for useSyncExternalStore). */
export function getAuth(): AuthState {
  return state;
}

export function subscribeAuth(l: () => void): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

/** Tells the browser's other tabs that the sign-in changed, so that they check it again. */
const tabs: BroadcastChannel | null = typeof BroadcastChannel === "function" ? new BroadcastChannel("parley.session") : null;
if (tabs) tabs.onmessage = () => void checkIdentity();

function fromWhoami(who: { kind: string; agentId?: string }): Identity {
  if (who.kind === "agent") return { kind: "agent", agentId: who.agentId ?? "" };
  return { kind: who.kind as "admin" | "viewer" };
}

/**
 * Finds out what the browser's identity may do, from `GET /v1/whoami`:
 * signed in by the session cookie (the token's kind and agent), or a
 * server that runs open. A 401 means the server wants a (another) token;
 * when the server cannot be reached the page asks again, less and less
 * often. An older page's token left in sessionStorage is moved to the
 * cookie first, and deleted.
 */
export async function checkIdentity(retry = 0): Promise<void> {
  const old = read("sessionStorage", OLD_TOKEN_KEY);
  if (old !== null) {
    write("sessionStorage", OLD_TOKEN_KEY, null);
    if (old.trim()) return signIn(old);
  }
  const s = state;
  try {
    const who = await s.client.whoami();
    if (state.token !== s.token) return;
    const token = who.cookie ? (s.token ?? "session-" + ++signIns) : null;
    setState({ token, identity: who.open && !who.cookie ? { kind: "open" } : fromWhoami(who) });
  } catch (err) {
    if (state.token !== s.token) return;
    if (err instanceof ParleyError && err.status === 401) {
      const stale = csrfProof() !== "";
      setState({ token: null, identity: { kind: "none", refused: stale } });
      if (stale) void endSession();
      return;
    }
    const delay = Math.min(30_000, 1000 * 2 ** retry);
    setTimeout(() => {
      if (state.token === s.token && state.identity.kind === "checking") void checkIdentity(retry + 1);
    }, delay);
  }
}

/**
 * Signs the browser in with a token (`POST /v1/session`): the server keeps
 * it in an HttpOnly cookie, which every tab of the browser then sends.
 */
export async function signIn(token: string): Promise<void> {
  const t = token.trim();
  setState({ token: null, identity: { kind: "checking" } });
  let res: Response;
  try {
    res = await globalThis.fetch("/v1/session", {
      method: "POST",
      headers: { "Content-Type": "application/json", Accept: "application/json" },
      body: JSON.stringify({ token: t }),
      credentials: "same-origin",
      cache: "no-store",
    });
  } catch {
    setState({ identity: { kind: "none", refused: false, error: "The server could not be reached; try again." } });
    return;
  }
  if (!res.ok) {
    const body = (await res.json().catch(() => ({}))) as { error?: { message?: string } };
    const refused = res.status === 401 || res.status === 422;
    setState({ identity: { kind: "none", refused, ...(refused ? {} : { error: body.error?.message ?? `The server answered ${res.status}.` }) } });
    return;
  }
  const who = (await res.json()) as { kind: string; agentId?: string };
  setState({ token: "session-" + ++signIns, identity: fromWhoami(who) });
  tabs?.postMessage("signed-in");
}

/** Clears the session's cookies (`DELETE /v1/session`). */
async function endSession(): Promise<void> {
  const proof = csrfProof();
  await globalThis
    .fetch("/v1/session", { method: "DELETE", headers: proof ? { [CSRF_HEADER]: proof } : {}, credentials: "same-origin", cache: "no-store" })
    .catch(() => undefined);
}

/** Signs the browser out, in every tab: the cookie is cleared. */
export async function signOut(): Promise<void> {
  await endSession();
  setState({ token: null, identity: { kind: "checking" } });
  tabs?.postMessage("signed-out");
  return checkIdentity();
}

/** Sets the agent the page writes as (open mode, admin token). */
export function setPerson(person: string): void {
  const p = person.trim() || DEFAULT_PERSON;
  write("localStorage", PERSON_KEY, p);
  setState({ person: p });
}

/**
 * The `agentId` a write names: the person where the identity writes as any
 * agent (open, admin), none where the token says who writes (an agent's).
 */
export function writerId(a: AuthState = state): string | undefined {
  return a.identity.kind === "open" || a.identity.kind === "admin" || a.identity.kind === "checking" ? a.person : undefined;
}

/** Whether the identity may write at all. */
export function canWrite(a: AuthState = state): boolean {
  return a.identity.kind !== "viewer" && a.identity.kind !== "none";
}

/** Whether the identity may manage tokens (an admin token, or an open server). */
export function canManage(a: AuthState = state): boolean {
  return a.identity.kind === "admin" || a.identity.kind === "open";
}
