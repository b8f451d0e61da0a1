// What the Stop button stops: the answer that still streams to the prompt
// being answered, named by its prompt, so that a stop pressed just as an
// answer ends cannot stop the next one.

import type { Message, QueuedPrompt } from "@parleyhq/client";
import { isStreamingText } from "./streaming";

/**
 * The prompt a Stop stops: the one being answered (dispatched, not already
 * aborted) while its answer still streams: a message of its runner that
 * replies to it or is of its exchange, or (in a v1 conversation) its
 * runner's streaming text. Undefined when no answer streams, as while a
 * prompt stays dispatched after its text has finished: Stop is not shown
 * then.
 */
export function stopTarget(prompts: readonly QueuedPrompt[] | undefined, shown: readonly Message[]): string | undefined {
  const q = prompts?.find((p) => p.runner && !p.aborted);
  if (!q) return undefined;
  const exchange = q.turnId ?? q.id;
  const streams = shown.some(
    (m) => m.status === "streaming" && m.agentId === q.runner && (m.replyTo === q.id || m.turnId === exchange || isStreamingText(m)),
  );
  return streams ? q.id : undefined;
}
