// Layout breaks a screenshot would show, found in the page itself: the
// document scrolling sideways, an element reaching past the screen's
// edge, a text cut short without its whole in a tooltip, and controls
// drawn over one another. The console's tests check every screen with it,
// at desktop and phone widths.

import type { Page } from "playwright-core";

/** What is wrong with the page's layout; every list empty when nothing is. */
export interface Breaks {
  /** The document scrolls sideways. */
  sideways: boolean;
  /** Elements reaching past the screen's left or right edge (the document's width: a phone's
   * browser widens its layout viewport, innerWidth, to hold what is too wide). */
  outside: string[];
  /** Texts cut short (wider than their box) whose whole is in no title. */
  cut: string[];
  /** Pairs of visible controls (buttons, fields, links) that overlap. */
  overlaps: string[];
}

/**
 * Looks for layout breaks in the page: texts cut and controls overlapping
 * in the open modal dialog when there is one (what is under its backdrop
 * cannot be used), anything past the screen's edge anywhere. The flow
 * picture and code blocks scroll in boxes of their own, and the skip link
 * is off screen until focused: those are left out.
 */
export function layoutBreaks(page: Page): Promise<Breaks> {
  return page.evaluate(() => {
    const name = (e: Element) => {
      const label = e.getAttribute("aria-label") ?? (e.textContent ?? "").trim().slice(0, 40);
      return `${e.tagName.toLowerCase()}${e.className && typeof e.className === "string" ? "." + e.className.trim().split(/\s+/).join(".") : ""} "${label}"`;
    };
    // What is seen of an element: its box cut to every ancestor that clips what overflows it (a
    // scrolled list's rows scrolled away are not seen, though they are in the page).
    const seen = (e: Element) => {
      const r = e.getBoundingClientRect();
      let [left, top, right, bottom] = [r.left, r.top, r.right, r.bottom];
      for (let a = e.parentElement; a; a = a.parentElement) {
        const st = getComputedStyle(a);
        if (st.overflowX === "visible" && st.overflowY === "visible") continue;
        const c = a.getBoundingClientRect();
        [left, top, right, bottom] = [Math.max(left, c.left), Math.max(top, c.top), Math.min(right, c.right), Math.min(bottom, c.bottom)];
      }
      return { left, top, right, bottom };
    };
    const visible = (e: Element) => {
      const r = e.getBoundingClientRect();
      const s = getComputedStyle(e);
      return r.width > 0 && r.height > 0 && s.visibility !== "hidden" && s.opacity !== "0";
    };
    const root: Element = document.querySelector("dialog[open]") ?? document.body;
    const skipped = (e: Element) => !!e.closest(".flow, pre, .skip, .sr-only");
    const all = [...root.querySelectorAll("*")].filter((e) => !skipped(e) && visible(e));
    const d = document.documentElement;
    // Anything on the page may make it scroll sideways, under a dialog too.
    const outside = [...document.body.querySelectorAll("*")]
      .filter((e) => !skipped(e) && visible(e))
      .filter((e) => {
        const r = e.getBoundingClientRect();
        return (r.right > d.clientWidth + 1 || r.left < -1) && getComputedStyle(e).position !== "fixed";
      })
      .map(name);
    // A text is cut when an element holding text directly is wider inside than its box, and the
    // page gives no way to read the rest (a title on it or an ancestor).
    const cut = all
      .filter((e) => {
        if (!(e instanceof HTMLElement) || e.scrollWidth <= e.clientWidth + 1) return false;
        if (e instanceof HTMLInputElement || e instanceof HTMLTextAreaElement || e instanceof HTMLSelectElement) return false;
        if (![...e.childNodes].some((n) => n.nodeType === Node.TEXT_NODE && (n.textContent ?? "").trim() !== "")) return false;
        const s = getComputedStyle(e);
        if (s.overflowX === "auto" || s.overflowX === "scroll") return false; // scrolls: nothing lost
        return !e.closest("[title]");
      })
      .map((e) => `${name(e)} (${(e as HTMLElement).scrollWidth} > ${(e as HTMLElement).clientWidth})`);
    const controls = all.filter((e) => e.matches("button, a[href], input, select, textarea, [role=button]"));
    const overlaps: string[] = [];
    for (let i = 0; i < controls.length; i++) {
      for (let j = i + 1; j < controls.length; j++) {
        const a = controls[i]!;
        const b = controls[j]!;
        if (a.contains(b) || b.contains(a)) continue;
        const ra = seen(a);
        const rb = seen(b);
        const w = Math.min(ra.right, rb.right) - Math.max(ra.left, rb.left);
        const h = Math.min(ra.bottom, rb.bottom) - Math.max(ra.top, rb.top);
        if (w > 1 && h > 1) overlaps.push(`${name(a)} over ${name(b)}`);
      }
    }
    return { sideways: d.scrollWidth > d.clientWidth, outside, cut, overlaps };
  });
}

/** No breaks: what `layoutBreaks` returns on a page that fits. */
export const fits: Breaks = { sideways: false, outside: [], cut: [], overlaps: [] };
