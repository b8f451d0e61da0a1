// The ws package's WebSocket, as the client takes one (Node 20 has no
// WebSocket client): for the tests here and the web UI's browser tests.

import WebSocket from "ws";
import type { WebSocketLike } from "../src/index.js";

/** The ws package's WebSocket, as the client takes one. */
export const NodeWebSocket = WebSocket as unknown as WebSocketLike;
