import type { Guidance, QueuedPrompt } from "@parleyhq/client";

/**
 * The agents with a runner attached, as the guidance says (presence), or
 * null when it is not known (no guidance: the conversation is closed, or
 * not joined yet).
 */
export function runnersOf(g: Guidance | null): readonly string[] | null {
  return g ? (g.runners ?? none) : null;
}

/** No runners: one array, so that a memoized component sees no change. */
const none: readonly string[] = Object.freeze([]);

/**
 * Whether a waiting prompt has no runner attached that may answer it: none
 * of its addressee (`to`), or none at all. Unknown presence says no.
 */
export function noRunnerFor(p: QueuedPrompt, runners: readonly string[] | null): boolean {
  if (runners === null || p.runner) return false;
  return p.to ? !runners.includes(p.to) : runners.length === 0;
}
