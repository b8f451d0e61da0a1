// The domain types of Parley as its HTTP API and streams carry them (JSON,
// camelCase). Times are RFC 3339 strings in UTC with milliseconds; a time
// that is not set is null.

/** Who speaks in a message. */
export type Role = "user" | "assistant" | "system" | "tool";

/** The life-cycle state of a message. */
export type MessageStatus = "streaming" | "complete" | "canceled" | "error";

/** What a message closes: nothing, the writer's turn, or the whole conversation. */
export type Finality = "none" | "turn" | "conversation";

/** Which agent the guidance names after a turn closes. */
export type TurnPolicy = "round-robin" | "free" | "next";

/** The status of a tool call. */
export type ToolStatus = "pending" | "running" | "completed" | "error";

/** Why a message ended. */
export type FinishReason = "end_turn" | "error" | "canceled";

/** A piece of text. `streaming` is true while more may be appended to it. */
export interface TextPart {
  type: "text";
  /** Left out by the server when empty. */
  text?: string;
  streaming?: boolean;
}

/** A tool call and, once it ran, its result or error. */
export interface ToolCallPart {
  type: "tool-call";
  callId: string;
  toolName?: string;
  status?: ToolStatus | (string & {});
  args?: unknown;
  result?: unknown;
  error?: string;
}

/** How the message ended. */
export interface FinishPart {
  type: "finish";
  reason: FinishReason | (string & {});
}

/** An error the agent met (the model failed, say). */
export interface ErrorPart {
  type: "error";
  message?: string;
}

/** What an input request asks: a yes or no on a tool call, or a question. */
export type InputKind = "approval" | "question";

/** Where an input request stands. */
export type InputStatus = "pending" | "answered" | "expired" | "canceled";

/** One choice of a question. */
export interface InputOption {
  label: string;
  description?: string;
}

/** The answer to an approval. */
export interface Approval {
  approved: boolean;
  reason?: string;
}

/**
 * An agent's request for a person's input: an approval of a tool call, or
 * a question (with `options` to choose from, a JSON Schema the answer must
 * fit, or free text). While it is `pending` its message waits
 * (`awaitingInput`). An approval's answer is an {@link Approval}; a
 * question's is JSON valid against `schema`, or `{choices: [label…]}` for
 * `options`, or `{text}`.
 */
export interface InputRequestPart {
  type: "input-request";
  requestId: string;
  kind: InputKind | (string & {});
  /** The tool call an approval is about. */
  toolCallId?: string;
  title?: string;
  /** Longer text, in Markdown. */
  detail?: string;
  toolName?: string;
  args?: unknown;
  schema?: unknown;
  options?: InputOption[];
  /** Whether several options may be chosen. */
  multiple?: boolean;
  expiresAt?: string | null;
  status: InputStatus | (string & {});
  answer?: unknown;
  answeredBy?: string;
  answeredAt?: string | null;
  /** Why it was canceled or expired (`stopped`, `steered`, `reverted`, `aborted`, `finalized`, `expired`). */
  reason?: string;
}

/** One typed piece of a message. */
export type Part = TextPart | ToolCallPart | FinishPart | ErrorPart | InputRequestPart;

/** Where a message came from outside Parley (a chat platform). */
export interface Channel {
  type: string;
  id: string;
}

/** What a summarized copy of a message left out: the whole message's size in JSON. */
export interface Summary {
  bytes: number;
}

/** Marks of a message imported from an older agent-memory store. */
export interface Legacy {
  row: number;
  madeId?: boolean;
  seenBy?: string[];
}

/**
 * What a person or agent says. `seq` is the seq of the event that wrote it.
 * While it streams, it is complete as of `updatedSeq`: the `chunk` and
 * `part.updated` events after that seq continue it. A copy with
 * `summarized` set (a stream's snapshot leaves out a large message) has no
 * parts, content or metadata: read it whole with `ParleyClient.message`.
 */
export interface Message {
  id: string;
  conversationId: string;
  seq: number;
  role: Role;
  agentId: string;
  parts: Part[];
  content: string;
  status: MessageStatus;
  turn: number;
  turnId: string;
  replyTo?: string;
  depth: number;
  finality: Finality;
  next?: string;
  retryOf?: string;
  channel?: Channel;
  metadata?: unknown;
  /** Left out when 0. */
  updatedSeq?: number;
  legacy?: Legacy;
  /** True while the message has a pending input request: it stays `streaming`, its turn held. */
  awaitingInput?: boolean;
  createdAt: string | null;
  updatedAt: string | null;
  summarized?: Summary;
}

/** A conversation: one log, with its participants and turn policy. */
export interface Conversation {
  id: string;
  /** Random; changes only if the history is replaced. */
  epoch: string;
  title?: string;
  participants: string[];
  members?: string[];
  turnPolicy: TurnPolicy;
  messageFormat: string;
  metadata?: unknown;
  createdBy?: string;
  createdAt: string | null;
  /** Its own turn lease in milliseconds; left out when it has the server's. */
  turnLeaseMs?: number;
}

/** Agent ids to add to a list and to remove from it (adding one there already, or removing one absent, changes nothing). */
export interface NameChanges {
  add?: string[];
  remove?: string[];
}

/**
 * What to change of a conversation (`ParleyClient.updateConversation`):
 * every field optional, at least one given. Its id, turn policy, message
 * format and turn lease never change.
 */
export interface ConversationPatch {
  /** Replaces the title ("" removes it). */
  title?: string;
  /** A JSON merge patch (RFC 7396) of the metadata: a key set to null is removed; null removes all of it. */
  metadata?: unknown;
  /** The agents the turn policy takes turns among. */
  participants?: NameChanges;
  /** Agents that take part but whom the turn policy never names; one removed loses access. */
  members?: NameChanges;
}

/**
 * The data of a `conversation.updated` event: the conversation's title,
 * metadata (null: none), participants and members after a change, whole,
 * and who changed it. Fold it with `applyConversationUpdate`.
 */
export interface ConversationUpdateData {
  title: string;
  metadata: unknown;
  participants: string[];
  members: string[];
  updatedBy: string;
}

/** A place in a conversation's log: the last seq seen, in an epoch. */
export interface Position {
  seq: number;
  /** Empty or left out: the current epoch. */
  epoch?: string;
}

/** The turn that is open. */
export interface OpenTurn {
  turn: number;
  owner: string;
  turnId?: string;
  delegates?: string[];
  openedSeq: number;
  reset?: boolean;
}

/** An agent's reservation of the next turn. */
export interface Claim {
  agentId: string;
  turn: number;
  expiresAt: string | null;
}

/** The summary of a conversation's state that callers decide with. */
export interface Head {
  lastSeq: number;
  epoch: string;
  lastTurn: number;
  openTurn: OpenTurn | null;
  claim: Claim | null;
  closed: boolean;
  lastClosedSeq: number;
  /** When the last event was written (RFC 3339); absent on data written before servers kept it. */
  lastEventAt?: string;
  /** The input requests still pending, oldest first (left out when none is). */
  pendingInputs?: PendingInput[];
}

/** An input request still pending, as a head lists it. */
export interface PendingInput {
  requestId: string;
  messageId: string;
  /** The agent that asked. */
  agentId: string;
  kind: InputKind | (string & {});
  title?: string;
  expiresAt?: string | null;
}

/**
 * An input request as `GET …/inputs` lists it: the part's fields, with
 * where it is and who asked.
 */
export interface Input extends Omit<InputRequestPart, "type"> {
  messageId: string;
  agentId: string;
  conversationId: string;
}

/** Who should act next. An empty `nextAgentId` means anyone may start. */
export interface Guidance {
  nextAgentId: string;
  kind: "start_turn" | "continue_turn";
  turn: number;
  afterSeq: number;
  /**
   * Presence: the agents with a runner attached that answers in the
   * conversation (its own runners and agent-wide ones), on any node,
   * sorted; left out when none is.
   */
  runners?: string[];
}

/** A conversation with its head and guidance (null once it is closed). */
export interface View {
  conversation: Conversation;
  head: Head;
  guidance: Guidance | null;
}

/** A piece of a search hit's snippet: plain text, `match` on the words the search found. Show it as text, never as HTML. */
export interface SnippetPart {
  text: string;
  match?: boolean;
}

/** A message a search found: where it is, who wrote it, a snippet of its text, and its rank (higher first, within one search). */
export interface SearchHit {
  conversationId: string;
  conversationTitle?: string;
  messageId: string;
  seq: number;
  agentId: string;
  role: Role;
  createdAt: string;
  snippet: SnippetPart[];
  rank: number;
}

/** A prompt mode: `followup` (FIFO), `steer`, `collect` or `reject`. */
export type PromptMode = "followup" | "steer" | "collect" | "reject";

/** A prompt in a conversation's queue, waiting or being answered. */
export interface QueuedPrompt {
  id: string;
  mode: PromptMode | (string & {});
  agentId: string;
  to?: string;
  channel?: Channel;
  /** The seqs of the `prompt.queued` events that hold its text. */
  parts: number[];
  /** When a collect prompt stops collecting. */
  until: string | null;
  /** The agent it was dispatched to; left out while it waits. */
  runner?: string;
  /** True once its user message exists. */
  written?: boolean;
  turnId?: string;
  /** The length of its text in bytes. */
  bytes?: number;
  /** True once the prompt being answered was aborted. */
  aborted?: boolean;
  /**
   * Its text, when the client knows it (from its `prompt.queued` events, or
   * read by `ParleyClient.promptTexts`). The server's queue does not carry it.
   */
  content?: string;
  /** What a waiting prompt waits for (`GET …/prompts`); absent on the prompt being answered. */
  waitingOn?: WaitingOn;
}

/** What a waiting prompt waits for. */
export interface WaitingOn {
  reason: "turn" | "claim" | "prompt" | "queue" | "runner" | "collect" | (string & {});
  /** The turn's owner, the claim's holder, the runner answering, or the agent a runner is wanted of. */
  agentId?: string;
  turn?: number;
  turnId?: string;
  /** The prompt being answered, ahead of it, or collecting. */
  promptId?: string;
  /** When what it waits for ends at the latest, if known. */
  until?: string;
}

/** A scheduled prompt. */
export interface Task {
  id: string;
  conversationId: string;
  agentId: string;
  prompt: string;
  cron?: string;
  everyMs?: number;
  nextRunAt: string | null;
  createdAt: string | null;
}

/** A bearer token, as listed (its secret is shown once, when it is made). */
/** Who a request acts as (`GET /v1/whoami`). */
export interface WhoAmI {
  /** The token's kind; an open server's requests without a token act as `admin`. */
  kind: "agent" | "viewer" | "admin";
  /** The agent an agent token writes as; empty for viewer and admin. */
  agentId: string;
  /** Whether the server runs open (no tokens, loopback only). */
  open: boolean;
  /** Whether the request was signed in by the web UI's session cookie (`POST /v1/session`). */
  cookie?: boolean;
}

export interface Token {
  id: string;
  kind: "agent" | "viewer" | "admin";
  agentId?: string;
  name?: string;
  createdAt: string | null;
  revokedAt: string | null;
  /** The secret: only in the answer to `createToken`. */
  token?: string;
}

// Event data.

/** The data of a `chunk` event: text to append to a streaming message. */
export interface ChunkData {
  messageId: string;
  content: string;
  checkpoint?: boolean;
}

/** The data of a `part.updated` event: a tool call was added or changed, or an input request opened. */
export interface PartUpdateData {
  messageId: string;
  part: ToolCallPart | InputRequestPart;
  checkpoint?: boolean;
}

/** The data of `input.answered`: an input request ended (the event's `agentId` answered it, or stopped it; empty for an expiry). */
export interface InputAnsweredData {
  messageId: string;
  requestId: string;
  status: Exclude<InputStatus, "pending"> | (string & {});
  answer?: unknown;
  answeredBy?: string;
  answeredAt?: string | null;
  reason?: string;
}

/** The data of `input.acked`: the asking runner has the outcome. */
export interface InputAckedData {
  messageId: string;
  requestId: string;
}

/** The data of a `messages.removed` event (a revert). */
export interface MessagesRemovedData {
  messageIds: string[];
}

/**
 * The data of `compacted`: it stands where a `chunk` or `part.updated` of a
 * message that ended long ago was, once the server compacted it; it
 * carries nothing and changes no message (the message's row holds all of
 * it).
 */
export type CompactedData = Record<string, never>;

/** The data of `turn.reset` and `turn.aborted`. */
export interface TurnRefData {
  turn: number;
  reason?: string;
}

/** The data of a `delegation` event. */
export interface DelegationData {
  from: string;
  to: string;
  turn: number;
}

/** The data of a `trace` event. */
export interface TraceData {
  id?: string;
  payload: unknown;
}

/** The data of a `task.run` event. */
export interface TaskRunData {
  taskId: string;
  runId: string;
}

/** The data of the prompt queue's events. */
export interface PromptEventData {
  id: string;
  /** On `prompt.queued`: the collect prompt it was merged into. */
  into?: string;
  content?: string;
  mode?: PromptMode | (string & {});
  to?: string;
  channel?: Channel;
  runner?: string;
  reason?: string;
  until?: string | null;
  turnId?: string;
}

/** Each event type of the log and its data. */
export interface EventDataMap {
  "conversation.created": Conversation;
  "conversation.updated": ConversationUpdateData;
  message: Message;
  "message.updated": Message;
  chunk: ChunkData;
  "part.updated": PartUpdateData;
  "messages.removed": MessagesRemovedData;
  compacted: CompactedData;
  trace: TraceData;
  "turn.claimed": Claim;
  "claim.expired": Claim;
  "turn.reset": TurnRefData;
  "turn.aborted": TurnRefData;
  delegation: DelegationData;
  "task.run": TaskRunData;
  "prompt.queued": PromptEventData;
  "prompt.dispatched": PromptEventData;
  "prompt.aborted": PromptEventData;
  "prompt.completed": PromptEventData;
  "prompt.canceled": PromptEventData;
  "prompt.requeued": PromptEventData;
  "prompt.promoted": PromptEventData;
  "input.answered": InputAnsweredData;
  "input.acked": InputAckedData;
}

/** An event type of the log. */
export type EventType = keyof EventDataMap;

/**
 * Every event type the server writes, the same list as
 * {@link EventDataMap}'s keys (the compiler holds the two together).
 */
export const EVENT_TYPES = [
  "conversation.created",
  "conversation.updated",
  "message",
  "message.updated",
  "chunk",
  "part.updated",
  "messages.removed",
  "compacted",
  "trace",
  "turn.claimed",
  "claim.expired",
  "turn.reset",
  "turn.aborted",
  "delegation",
  "task.run",
  "prompt.queued",
  "prompt.dispatched",
  "prompt.aborted",
  "prompt.completed",
  "prompt.canceled",
  "prompt.requeued",
  "prompt.promoted",
  "input.answered",
  "input.acked",
] as const satisfies readonly EventType[];

// A key of EventDataMap left out of EVENT_TYPES fails to compile here.
const everyEventTypeListed: Exclude<EventType, (typeof EVENT_TYPES)[number]> extends never ? true : never = true;
void everyEventTypeListed;

/** One entry of a conversation's log, of type K. */
export interface EventOf<K extends EventType> {
  conversationId: string;
  seq: number;
  type: K;
  turn: number;
  turnId?: string;
  agentId?: string;
  finality: Finality;
  ts: string | null;
  data: EventDataMap[K];
}

/**
 * One entry of a conversation's log, as `GET …/events` and the streams
 * carry it. Switch on `type` to read `data`. A newer server may send types
 * this union does not list; folds leave those alone.
 */
export type ParleyEvent = { [K in EventType]: EventOf<K> }[EventType];

/** Text an agent streams with no message yet: shown as its answer so far, after the messages before `seq`. */
export interface StreamingText {
  readonly agentId: string;
  readonly turn: number;
  /** The exchange it belongs to ("" if the event named none). */
  readonly turnId: string;
  /** The seq of its first chunk. */
  readonly seq: number;
  /** The seq of its last chunk. */
  readonly updatedSeq: number;
  readonly content: string;
}

/** The first frame of every stream connection. */
export interface Init {
  /** True when the stream continues exactly after the position sent. */
  recovered: boolean;
  /** The stream continues with the event after `position.seq`. */
  position: Position;
  conversation: Conversation;
  head: Head;
  guidance: Guidance | null;
  /** Only when `recovered` is false: the snapshot's messages, oldest first. */
  messages?: Message[];
  /**
   * Only when `recovered` is false, in a conversation made with
   * messageFormat v1: the text each agent streams that no message holds
   * yet, as of `position.seq`, in the order they started.
   */
  streaming?: StreamingText[];
}

/** What a stream yields: an init (after each connect), an event of the log, or a guidance. */
export type Frame =
  | { type: "init"; init: Init }
  | { type: "event"; event: ParleyEvent }
  | { type: "guidance"; guidance: Guidance };

/** The body of every error answer and error frame. */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    head?: Head;
    [detail: string]: unknown;
  };
}

/** Where a prompt stands (`GET …/prompts/{pid}`). */
export interface PromptStatus {
  id: string;
  state: "queued" | "dispatched" | "answering" | "completed" | "canceled" | (string & {});
  /** Who asked. */
  agentId: string;
  /** Its place in the queue (0: first), while it is in it. */
  position?: number;
  /** What a queued prompt waits for; absent on one about to be dispatched. */
  waitingOn?: WaitingOn;
  /** The agent it was dispatched to. */
  runner?: string;
  /** Its answer: the runner's newest message in the prompt's exchange. */
  messageId?: string;
  aborted?: boolean;
  /** Why it was canceled (`withdrawn`, `aborted`). */
  reason?: string;
  endedSeq?: number;
  endedAt?: string;
  queued?: QueuedPrompt;
  turnId: string;
  lastSeq: number;
}
