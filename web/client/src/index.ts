// @parleyhq/client: a typed client of the Parley conversation server.

export * from "./types.js";
export { ParleyError, errorFromBody, isFatal, type ErrorCode } from "./errors.js";
export type { Backup } from "./backup.js";
export { MAX_PROMPT_WAIT_MS, ParleyClient } from "./client.js";
export type { ClientOptions, FetchLike, WebSocketLike } from "./options.js";
export type {
  ConversationFilters,
  ConversationPage,
  EventPage,
  ExportFormat,
  ImportResult,
  ImportWarning,
  ListConversationsOptions,
  MessagePage,
  MessageResult,
  NewConversation,
  NewMessage,
  NewPrompt,
  NewTask,
  Precondition,
  PromptResult,
  SearchOptions,
  SearchPage,
  Thread,
  Stopped,
  TurnResult,
} from "./bodies.js";
export {
  MAX_FRAME_BYTES,
  Subscription,
  backoffDelay,
  GapError,
  type StreamClient,
  type StreamStatus,
  type SubscribeOptions,
  type Transport,
} from "./stream.js";
export { SSEParser, FrameTooLargeError, type SSEMessage } from "./sse.js";
export { BufferFullError, WSNotOpened } from "./transport.js";
export { appendText, applyEvent as applyEventToMessages, applyInputAnswered, applyInputRequest, applyTool, foldMessages, pendingRequests, hold, missing as missingMessages, noMessages, summarize, type Messages } from "./fold.js";
export { applyEventToStreamingTexts, foldStreamingTexts, noStreamingTexts, type StreamingText, type StreamingTexts } from "./streamed.js";
export {
  applyConversationUpdate,
  applyEvent,
  applyPendingInput,
  applyPrompt,
  emptyState,
  foldFrame,
  holdMessage,
  missing,
  withQueue,
  withView,
  type ConversationState,
  type PromptQueue,
} from "./state.js";
export { ConversationFold, LiveConversation, follow, type FollowOptions, type LiveSnapshot, type OlderState } from "./live.js";
export { nextFrame, type Schedule } from "./batch.js";
export { groupRetries, type Attempt } from "./retries.js";
export { Runner, agentRunner, conversationRunner, type RunnerHandler, type RunnerOptions, type RunnerPush } from "./runner.js";
export { Reply, type CreateOptions, type FinalizeOptions, type ToolUpdate } from "./reply.js";
export { InputNotAnsweredError, type InputOutcome, type InputRequest } from "./asking.js";
