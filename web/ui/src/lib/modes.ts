// Prompt modes in a person's words: what the composer offers and what the
// queue's badges say (the API's names — followup, steer, collect, reject —
// mean little to someone who has not read its docs).

import type { PromptMode } from "@parleyhq/client";

/** A mode: its API name, the composer's label, the queue's badge, and what it does. */
export interface ModeWords {
  mode: PromptMode;
  label: string;
  badge: string;
  help: string;
}

/** The modes, in the order the composer offers them. */
export const MODES: readonly ModeWords[] = [
  { mode: "followup", label: "In line", badge: "in line", help: "Answered after the prompts before it" },
  { mode: "steer", label: "Interrupt", badge: "interrupts", help: "Stops the answer under way and is answered first" },
  { mode: "collect", label: "Merge", badge: "merges", help: "Prompts sent within a short window are merged into one" },
  { mode: "reject", label: "Only if idle", badge: "only if idle", help: "Refused unless nothing is waiting or being answered" },
];

/** The queue's badge for a mode (its API name if unknown). */
export function modeBadge(mode: string): string {
  return MODES.find((m) => m.mode === mode)?.badge ?? mode;
}

/** What a mode does, in a sentence (for the badge's tooltip). */
export function modeHelp(mode: string): string | undefined {
  return MODES.find((m) => m.mode === mode)?.help;
}
