// Markdown to safe HTML: marked parses (GitHub's dialect, line breaks kept),
// DOMPurify removes whatever could run or restyle the page (scripts, event
// handlers, style attributes, forms), and links open in a new tab without
// a referrer.

import DOMPurify from "dompurify";
import { Marked } from "marked";

const marked = new Marked({ gfm: true, breaks: true, async: false });

let hooked = false;

/** The HTML of a markdown text, sanitized. */
export function renderMarkdown(text: string): string {
  if (!hooked) {
    DOMPurify.addHook("afterSanitizeAttributes", (node) => {
      if (node.tagName === "A" && node.getAttribute("href")) {
        node.setAttribute("target", "_blank");
        node.setAttribute("rel", "noopener noreferrer");
      }
    });
    hooked = true;
  }
  const html = marked.parse(text) as string;
  return DOMPurify.sanitize(html, { FORBID_ATTR: ["style"], FORBID_TAGS: ["style", "form", "input", "button", "textarea", "select"] });
}

/**
 * Splits the text of a part still streaming into blocks that the rest of
 * the text cannot change: its paragraphs up to its last blank line outside
 * a code fence, each a block, and then the tail still growing. Each block
 * is rendered once; only the tail is parsed again as text arrives. (Once
 * the part ends, its whole text is rendered at once.)
 */
export function splitStreaming(text: string): { blocks: string[]; tail: string } {
  const blocks: string[] = [];
  let start = 0;
  let fenced = false;
  let at = 0;
  while (at < text.length) {
    const nl = text.indexOf("\n", at);
    if (nl < 0) break;
    const line = text.slice(at, nl);
    if (/^ {0,3}(```|~~~)/.test(line)) fenced = !fenced;
    else if (!fenced && line.trim() === "") {
      const block = text.slice(start, at);
      if (block.trim() !== "") blocks.push(block);
      start = nl + 1;
    }
    at = nl + 1;
  }
  return { blocks, tail: text.slice(start) };
}
