// Client-side routes, from location.pathname (no hash routes): `/` is the
// list of conversations, `/c/{id}` a conversation, `/tokens` the tokens
// (for admins). A message to show is in
// the query (`?m=ID`), which the server never sees as a path.

import { useSyncExternalStore } from "react";

export type Route = { kind: "list" } | { kind: "conversation"; id: string } | { kind: "tokens" } | { kind: "missing"; path: string };

/** The path of the tokens' page. */
export const TOKENS_PATH = "/tokens";

/** The route of a path. */
export function parseRoute(pathname: string): Route {
  if (pathname === "/" || pathname === "") return { kind: "list" };
  if (pathname === TOKENS_PATH) return { kind: "tokens" };
  const m = /^\/c\/([^/]+)\/?$/.exec(pathname);
  if (m) {
    try {
      return { kind: "conversation", id: decodeURIComponent(m[1]!) };
    } catch {
      return { kind: "missing", path: pathname };
    }
  }
  return { kind: "missing", path: pathname };
}

/** The path of a conversation's page. */
export function conversationPath(id: string): string {
  return "/c/" + encodeURIComponent(id);
}

const CHANGE = "parley:navigate";

/** Goes to a path of the application without reloading the page. */
export function navigate(to: string, opts: { replace?: boolean } = {}): void {
  if (opts.replace) history.replaceState(null, "", to);
  else history.pushState(null, "", to);
  dispatchEvent(new Event(CHANGE));
}

function subscribe(l: () => void): () => void {
  addEventListener("popstate", l);
  addEventListener(CHANGE, l);
  return () => {
    removeEventListener("popstate", l);
    removeEventListener(CHANGE, l);
  };
}

/** The location's path and query, kept current. */
export function useLocation(): { pathname: string; search: string } {
  const href = useSyncExternalStore(subscribe, () => location.pathname + "\u0000" + location.search);
  const [pathname = "/", search = ""] = href.split("\u0000");
  return { pathname, search };
}

/** The filters of the list of conversations, as its URL's query holds them (see `listQuery`). */
export interface ListFilters {
  /** Words the title contains (`?title=`). */
  title: string;
  /** Only the conversations the page's person takes part in (`?mine=1`). */
  mine: boolean;
  /** An agent among the participants (`?participant=`). */
  participant: string;
  /** Metadata keys and the string values they must have (`?metadata.KEY=VALUE`, as the API's), in order. */
  metadata: [string, string][];
}

/** The most metadata filters a list takes (the server's bound). */
export const MAX_METADATA_FILTERS = 4;

/** The list's filters in a location's query (`location.search`); what is not there is empty. */
export function parseListFilters(search: string): ListFilters {
  const q = new URLSearchParams(search);
  const metadata: [string, string][] = [];
  for (const [k, v] of q) {
    if (k.startsWith("metadata.") && k.length > "metadata.".length && metadata.length < MAX_METADATA_FILTERS) metadata.push([k.slice("metadata.".length), v]);
  }
  return { title: q.get("title") ?? "", mine: q.get("mine") === "1", participant: q.get("participant") ?? "", metadata };
}

/** The query (with its `?`, or "" for none) that holds the list's filters f. */
export function listQuery(f: ListFilters): string {
  const q = new URLSearchParams();
  if (f.title) q.set("title", f.title);
  if (f.mine) q.set("mine", "1");
  if (f.participant) q.set("participant", f.participant);
  for (const [k, v] of f.metadata) if (k) q.append("metadata." + k, v);
  const s = q.toString();
  return s ? "?" + s : "";
}
