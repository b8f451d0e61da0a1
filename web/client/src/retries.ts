// An answer whose runner failed over is more than one message: the attempt
// that failed, then the retry that names it in `retryOf` (and a retry of
// the retry). The chat protocols (`POST /v1/chat`, AG-UI) show the attempts
// as one answer, under the first attempt's id, each attempt's parts in
// turn; groupRetries groups messages read back the same way.

/** What grouping retries reads of a message. */
export interface Attempt {
  readonly id: string;
  /** The message this one retries (a runner's failed attempt). */
  readonly retryOf?: string | undefined;
}

/**
 * The messages grouped by answer: a message that retries another of them
 * (its `retryOf` names one, directly or through the attempts between)
 * joins the group of the first attempt; every other message is a group of
 * its own. Given the messages in seq order (as the server lists them),
 * each group holds one answer's attempts in order, the first attempt
 * first, and the groups are in the order of their first messages.
 */
export function groupRetries<M extends Attempt>(messages: readonly M[]): M[][] {
  const byId = new Map(messages.map((m) => [m.id, m]));
  const first = (m: M): M => {
    let at = m;
    // Bounded: a loop of retryOf (which no server writes) ends too.
    for (let n = 0; n < messages.length && at.retryOf && byId.has(at.retryOf); n++) at = byId.get(at.retryOf)!;
    return at;
  };
  const groups = new Map<M, M[]>();
  for (const m of messages) {
    const f = first(m);
    const group = groups.get(f);
    if (group) group.push(m);
    else groups.set(f, [m]);
  }
  return [...groups.values()];
}
