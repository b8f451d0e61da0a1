// The bodies of the HTTP calls of docs/api.md and their answers, as
// ParleyClient sends and returns them.

import type {
  Channel,
  Claim,
  Conversation,
  Finality,
  Guidance,
  Head,
  Message,
  ParleyEvent,
  Part,
  PromptMode,
  QueuedPrompt,
  Role,
  SearchHit,
  TurnPolicy,
  View,
} from "./types.js";

/** The body of `createConversation`. */
export interface NewConversation {
  id?: string;
  title?: string;
  participants?: string[];
  members?: string[];
  turnPolicy?: TurnPolicy;
  messageFormat?: "v1" | "v2";
  metadata?: unknown;
  /** The conversation's own turn lease in milliseconds (1000 to 86400000); left out, the server's. */
  turnLeaseMs?: number;
}

/** A turn precondition: "I am starting turn N" or "I am continuing turn N". */
export interface Precondition {
  expectTurn: number;
  startingTurn: boolean;
}

/** The body of `postMessage`: give `content` or `parts`. */
export interface NewMessage {
  id?: string;
  agentId?: string;
  role?: Role;
  content?: string;
  parts?: Part[];
  replyTo?: string;
  turnId?: string;
  finality?: Finality;
  next?: string;
  precondition?: Precondition;
  channel?: Channel;
  metadata?: unknown;
  /** The idempotency key: a retry with it returns the original answer. */
  clientRequestId?: string;
}

/** The answer to `postMessage`. */
export interface MessageResult {
  message: Message;
  seq: number;
  turn: number;
}

/** What a stop stopped: the prompt, and the message streaming its answer (null if none). */
export interface Stopped {
  status: "aborting";
  promptId: string;
  messageId: string | null;
}

/** The answer to the turn commands and to withdrawing or promoting a prompt. */
export interface TurnResult {
  turn: number;
  wasReset: boolean;
  claimed: boolean;
  claim?: Claim;
  seq: number;
  written: boolean;
  head: Head;
  guidance: Guidance | null;
}

/** The body of `prompt`. */
export interface NewPrompt {
  content: string;
  mode?: PromptMode;
  /** The agent whose runner should answer it (any, if left out). */
  to?: string;
  /** Where it came from (its answer goes back there): an admin's only, a channel's bridge. */
  channel?: Channel;
  id?: string;
  /** Who asks: needed with an admin token or an open server. */
  agentId?: string;
  /** Makes a retry safe: the same key and body queue the prompt once. */
  clientRequestId?: string;
}

/** The answer to `prompt`: the prompt's id, the seq that queued it, and the queue. */
export interface PromptResult {
  id: string;
  seq: number;
  queue: QueuedPrompt[];
}

/** A page of messages; `nextAfter` is there when there may be more: pass it as `after`. */
export interface MessagePage {
  messages: Message[];
  nextAfter?: number;
}

/** A page of events; `nextAfter` is there when there may be more: pass it as `after`. */
export interface EventPage {
  events: ParleyEvent[];
  nextAfter?: number;
}

/**
 * Which conversations a list keeps (docs/api.md): every filter given must
 * hold. An agent's token lists only its own conversations, whatever they say.
 */
export interface ConversationFilters {
  /** Those whose title contains it, ignoring case (at most 200 bytes). */
  title?: string;
  /** Those with this agent among their participants. */
  participant?: string;
  /** Those this agent takes part in: a participant, a member or their creator. */
  involves?: string;
  /** Those whose metadata has each top-level key with exactly that string value (at most 4). */
  metadata?: Record<string, string>;
}

/** The options of `listConversations`: the filters, and which page. */
export interface ListConversationsOptions extends ConversationFilters {
  /** A page's `nextCursor`, with the same filters. */
  cursor?: string;
  /** The page's size: 1 to 1000 (the server's default: 100). */
  limit?: number;
}

/** A page of conversations, most recently active first; `nextCursor` is there when there are more. */
export interface ConversationPage {
  conversations: View[];
  nextCursor?: string;
}

/** What `search` looks for, and which page of the answer it returns. */
export interface SearchOptions {
  /** Words a message's text must all have, and phrases in double quotes; nothing else is syntax. */
  q: string;
  /** Narrows the search to one conversation. */
  conversationId?: string;
  /** The page's size: 1 to 100 (the server's default: 20). */
  limit?: number;
  /** A page's `nextCursor`, with the same `q` and `conversationId`. */
  cursor?: string;
}

/** A page of a search's hits, best first; `nextCursor` is there when there may be more. */
export interface SearchPage {
  hits: SearchHit[];
  nextCursor?: string;
}

/** A message in its thread, with a page of its descendants; `nextAfter` is there when there may be more. */
export interface Thread {
  root: Message;
  ancestors: Message[];
  message: Message;
  descendants: Message[];
  nextAfter?: number;
  truncated: boolean;
}

/** An export format. */
export type ExportFormat = "markdown" | "json" | "jsonl";

/** The answer to `importConversation`. */
export interface ImportResult {
  conversation: Conversation;
  source: "export" | "legacy";
  events: number;
  messages: number;
  bytes: number;
  /** The first 1000 oddities of imported legacy rows (an export imports without any). */
  warnings: ImportWarning[];
  /** Every warning, counted by kind. */
  warningCounts: Record<string, number>;
  /** True when there were more warnings than `warnings` lists. */
  warningsTruncated: boolean;
}

/** One oddity of imported legacy rows, and what the import did about it (docs/export.md lists the kinds). */
export interface ImportWarning {
  /** The 1-based row of the input (its line, or its element of a JSON array). */
  row: number;
  /** What was found: `no-id`, `no-reply-to`, `missing-parent`, `self-reply`, `too-deep`, `out-of-order`, `no-time`, `bad-role`, `no-sender`, `new-agent`, `chats-merged`. */
  kind: string;
  /** The message of that row, when it has one. */
  messageId?: string;
  /** What was found and done, for people. */
  text: string;
}

/** The body of `createTask`: a `cron` (five fields, UTC) or an `everyMs`. */
export interface NewTask {
  conversationId: string;
  prompt: string;
  cron?: string;
  everyMs?: number;
  agentId?: string;
  id?: string;
}
