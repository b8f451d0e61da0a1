// How a client reaches a server: the options of a ParleyClient, and the
// fetch and WebSocket it calls. Shared by the client, its streams and its
// runners; it imports nothing of them.

/** The fetch function the client calls (the global one by default). */
export type FetchLike = (input: string, init?: RequestInit) => Promise<Response>;

/** A WebSocket constructor, as browsers have one (`globalThis.WebSocket`). */
export type WebSocketLike = new (url: string) => WebSocket;

/** How to reach a server. */
export interface ClientOptions {
  /**
   * The server's URL, such as `http://127.0.0.1:7700`; in a browser, empty
   * for the page's own origin.
   */
  baseUrl?: string;
  /** A bearer token; none on an open server. */
  token?: string;
  /** The fetch to call (default: `globalThis.fetch`). */
  fetch?: FetchLike;
  /** The WebSocket to stream with (default: `globalThis.WebSocket`, where there is one). */
  WebSocket?: WebSocketLike;
}
