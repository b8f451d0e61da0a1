// What a test sees of a message on the page over time: every text the page
// showed for it and every state its tool cards went through, recorded in
// the page at each change of the DOM (a MutationObserver), so that no
// frame between two polls of the test goes unseen.

import type { Page } from "playwright-core";

/** What the page showed of one message, change by change. */
export interface Seen {
  /** Each distinct text its text parts showed, in order, whitespace removed. */
  texts: string[];
  /** Each distinct label of its tool cards ("search, running"), in order. */
  tools: string[];
}

declare global {
  interface Window {
    __parleySeen?: Record<string, Seen>;
  }
}

/** Starts recording what the page shows of message `id` (again after a reload). */
export async function watchMessage(page: Page, id: string): Promise<void> {
  await page.evaluate((id) => {
    const seen: Seen = { texts: [], tools: [] };
    (window.__parleySeen ??= {})[id] = seen;
    const read = () => {
      const el = document.querySelector(`[data-message-id="${CSS.escape(id)}"]`);
      if (!el) return; // scrolled out of the virtualized list, or not there yet
      const text = [...el.querySelectorAll(".msg-body .md")].map((m) => m.textContent ?? "").join("").replace(/\s+/g, "");
      if (text && seen.texts[seen.texts.length - 1] !== text) seen.texts.push(text);
      for (const b of el.querySelectorAll(".tool-head")) {
        const label = (b.textContent ?? "").replace(/^[▸▾]/, "").replace(",", ", "); // the caret is hidden from the name
        if (!seen.tools.includes(label)) seen.tools.push(label);
      }
    };
    new MutationObserver(read).observe(document.body, { subtree: true, childList: true, characterData: true, attributes: true });
    read();
  }, id);
}

/** What the page showed of message `id` since {@link watchMessage}. */
export async function seen(page: Page, id: string): Promise<Seen> {
  return page.evaluate((id) => window.__parleySeen?.[id] ?? { texts: [], tools: [] }, id);
}

/** Text with its whitespace removed, as {@link Seen.texts} holds it. */
export function squeeze(text: string): string {
  return text.replace(/\s+/g, "");
}
