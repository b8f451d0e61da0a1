import { useEffect, useSyncExternalStore } from "react";
import { IdentityBar, TokenForm } from "./components/Identity";
import { NewConversation } from "./components/NewConversation";
import { canManage, checkIdentity, getAuth, subscribeAuth } from "./lib/auth";
import { navigate, parseRoute, TOKENS_PATH, useLocation } from "./lib/route";
import { ConversationList } from "./pages/ConversationList";
import { ConversationPage } from "./pages/ConversationPage";
import { TokensPage } from "./pages/TokensPage";

/** The application: the top bar, then the page the path names (or the token form when the server wants one). */
export function App() {
  const auth = useSyncExternalStore(subscribeAuth, getAuth);
  const loc = useLocation();
  const route = parseRoute(loc.pathname);
  useEffect(() => {
    void checkIdentity();
  }, []);
  useEffect(() => {
    if (route.kind !== "conversation") document.title = "Parley"; // a conversation's page names it
  }, [route.kind]);
  return (
    <>
      <a className="skip" href="#content">
        Skip to content
      </a>
      <header className="top">
        <a
          className="brand"
          href="/"
          onClick={(e) => {
            e.preventDefault();
            navigate("/");
          }}
        >
          Parley
        </a>
        <NewConversation auth={auth} />
        {canManage(auth) && (
          <a
            href={TOKENS_PATH}
            aria-current={route.kind === "tokens" ? "page" : undefined}
            onClick={(e) => {
              e.preventDefault();
              navigate(TOKENS_PATH);
            }}
          >
            Tokens
          </a>
        )}
        <IdentityBar auth={auth} />
      </header>
      <div id="content" className="content">
        {auth.identity.kind === "none" ? (
          <TokenForm refused={auth.identity.refused} error={auth.identity.error} />
        ) : route.kind === "list" ? (
          <ConversationList key={auth.token ?? ""} auth={auth} />
        ) : route.kind === "tokens" ? (
          <TokensPage auth={auth} />
        ) : route.kind === "conversation" ? (
          <ConversationPage key={route.id + "\u0000" + (auth.token ?? "")} id={route.id} auth={auth} search={loc.search} />
        ) : (
          <main className="missing">
            <h1>Nothing here</h1>
            <p>
              <a href="/">See the conversations</a>.
            </p>
          </main>
        )}
      </div>
    </>
  );
}
