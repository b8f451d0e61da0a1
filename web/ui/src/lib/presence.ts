import type { Guidance, Head, QueuedPrompt } from "@parleyhq/client";

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

/**
 * What the conversation waits on now, in a few words, most pressing
 * first: a person (input requests agents asked), an agent to finish its
 * open turn (or to connect, when it has no runner), an agent that claimed
 * the next turn, a runner for a waiting prompt, or nobody. Null while
 * the head is not known.
 */
export function waitingOn(h: Head | null, g: Guidance | null, prompts: readonly QueuedPrompt[] | undefined): string | null {
  if (!h) return null;
  if (h.closed) return "nobody: closed";
  const runners = runnersOf(g);
  const pending = h.pendingInputs?.length ?? 0;
  if (pending > 0) return pending === 1 ? "a person: 1 request" : `a person: ${pending} requests`;
  const o = h.openTurn;
  if (o) {
    const absent = runners !== null && !runners.includes(o.owner) ? " (no runner)" : "";
    return `${o.owner} to end turn ${o.turn}${absent}`;
  }
  if (h.claim) return `${h.claim.agentId}, who claimed turn ${h.claim.turn}`;
  const first = prompts?.find((x) => !x.runner);
  if (first && !prompts?.some((x) => x.runner)) {
    if (noRunnerFor(first, runners)) return first.to ? `a runner of ${first.to}` : "a runner";
    return first.to ? `${first.to} to take a prompt` : "a runner to take a prompt";
  }
  if (prompts?.some((x) => x.runner)) {
    const r = prompts.find((x) => x.runner)!;
    return `${r.runner} to answer`;
  }
  return "nobody";
}
