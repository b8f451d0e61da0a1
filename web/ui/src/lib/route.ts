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
