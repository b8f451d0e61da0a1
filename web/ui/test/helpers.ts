// Makers of messages and events for the unit tests: the client's, and the
// event that writes a message.
import type { Message, ParleyEvent } from "@parleyhq/client";
import { ev } from "../../client/test/makers.js";

export { conv, ev, msg } from "../../client/test/makers.js";

/** The `message` event that writes m. */
export function msgEv(m: Message): ParleyEvent {
  return ev(m.seq, "message", m, { agentId: m.agentId, turn: m.turn, turnId: m.turnId });
}
