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

/**
 * What the first waiting prompt waits for, as the guidance shows it, when
 * nothing is being answered: another agent's open turn (it ends when its
 * owner closes it, an admin aborts it, or its lease lapses). Null when the
 * prompt is being answered, waits behind another prompt, or the guidance
 * shows nothing in its way.
 */
export function turnInTheWay(prompts: readonly QueuedPrompt[], i: number, g: Guidance | null): string | null {
  const p = prompts[i];
  if (!p || !g || p.runner || prompts.some((x) => x.runner) || prompts.findIndex((x) => !x.runner) !== i) return null;
  if (g.kind !== "continue_turn" || g.nextAgentId === p.agentId) return null;
  return `waits for ${g.nextAgentId}'s open turn ${g.turn} to end`;
}
