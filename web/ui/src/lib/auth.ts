// Who the page is: the token it sends (kept in sessionStorage, for this tab
// only), what that token may do, and the person it writes as on an open
// server or with an admin token (kept in localStorage; `you` by default).
// The page talks only to the server that served it.

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
  /** The server wants a token (none was given, or it refused the one given). */
  | { kind: "none"; refused: boolean };

export interface AuthState {
  readonly token: string | null;
  readonly identity: Identity;
  /** The agent the page writes as where the token does not say (open mode, admin). */
  readonly person: string;
  readonly client: ParleyClient;
}

const TOKEN_KEY = "parley.token";
const PERSON_KEY = "parley.person";
export const DEFAULT_PERSON = "you";

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

const listeners = new Set<() => void>();
let state: AuthState = make(read("sessionStorage", TOKEN_KEY), read("localStorage", PERSON_KEY) ?? DEFAULT_PERSON, { kind: "checking" });

function make(token: string | null, person: string, identity: Identity): AuthState {
  // Every answer passes here: a 401 means the server wants a (another) token.
  const watched: FetchLike = async (input, init) => {
    const res = await globalThis.fetch(input, init);
    if (res.status === 401) refusedToken(token);
    return res;
  };
  return { token, person, identity, client: new ParleyClient({ token: token ?? undefined, fetch: watched }) };
}

/**
 * Notes that the server refused `token` (a 401, or a stream it ended as
 * unauthorized, as when the token is revoked): the page asks for another.
 */
export function refusedToken(token: string | null): void {
  if (state.token === token && state.identity.kind !== "none") setState({ identity: { kind: "none", refused: token !== null } });
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

/**
 * Finds out what the identity may do, from `GET /v1/whoami`: the token's
 * kind and agent, or that the server runs open. A 401 means the server wants
 * a (another) token; when the server cannot be reached the page asks again,
 * less and less often.
 */
export async function checkIdentity(retry = 0): Promise<void> {
  const s = state;
  try {
    const who = await s.client.whoami();
    if (state.token !== s.token) return;
    if (who.open && !s.token) setState({ identity: { kind: "open" } });
    else if (who.kind === "agent") setState({ identity: { kind: "agent", agentId: who.agentId } });
    else setState({ identity: { kind: who.kind } });
  } catch (err) {
    if (state.token !== s.token) return;
    if (err instanceof ParleyError && err.status === 401) {
      setState({ identity: { kind: "none", refused: s.token !== null } });
      return;
    }
    const delay = Math.min(30_000, 1000 * 2 ** retry);
    setTimeout(() => {
      if (state.token === s.token && state.identity.kind === "checking") void checkIdentity(retry + 1);
    }, delay);
  }
}

/** Uses a token for this tab, and checks it. */
export function applyToken(token: string): Promise<void> {
  const t = token.trim();
  write("sessionStorage", TOKEN_KEY, t);
  setState({ token: t, identity: { kind: "checking" } });
  return checkIdentity();
}

/** Forgets the tab's token. */
export function forgetToken(): Promise<void> {
  write("sessionStorage", TOKEN_KEY, null);
  setState({ token: null, identity: { kind: "checking" } });
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
