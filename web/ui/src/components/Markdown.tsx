import { memo, useMemo } from "react";
import { renderMarkdown, splitStreaming } from "../lib/markdown";

const Html = memo(function Html({ text }: { text: string }) {
  const html = useMemo(() => renderMarkdown(text), [text]);
  return <div dangerouslySetInnerHTML={{ __html: html }} />;
});

/**
 * A text part as markdown, sanitized; a blinking cursor after it while it
 * streams. While it streams, each finished paragraph is rendered once
 * and apart, so that a delta costs the parse of the last paragraph only.
 */
export const Markdown = memo(function Markdown({ text, streaming }: { text: string; streaming: boolean }) {
  if (!streaming) {
    return (
      <div className="md">
        <Html text={text} />
      </div>
    );
  }
  const { blocks, tail } = splitStreaming(text);
  return (
    <div className="md streaming">
      {blocks.map((b, i) => (
        <Html key={i} text={b} />
      ))}
      <Html text={tail} />
      <span className="cursor" aria-hidden="true" />
    </div>
  );
});
