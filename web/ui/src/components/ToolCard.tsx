import { memo, useId } from "react";
import { useOpen } from "../lib/disclosure";
import type { ToolCallPart } from "@parleyhq/client";
import { pretty } from "../lib/format";

/**
 * A tool call: a disclosure button named by what it shows, the tool and its status;
 * opened, its arguments and its result or error. Whether it is open is
 * kept by key, so that it stays open when the list scrolls it away and
 * back.
 */
export const ToolCard = memo(function ToolCard({ part, openKey }: { part: ToolCallPart; openKey: string }) {
  const [open, setOpen] = useOpen(openKey);
  const id = useId();
  const status = part.status ?? "pending";
  const name = part.toolName || "tool";
  return (
    <div className={`tool tool-${status}`}>
      <button type="button" className="tool-head" aria-expanded={open} aria-controls={id} onClick={() => setOpen(!open)}>
        <span className="tool-caret" aria-hidden="true">
          {open ? "▾" : "▸"}
        </span>
        {/* The name is what the button shows ("search, completed"), a label of its own would differ from what is seen; the comma is for screen readers only. */}
        <span className="tool-name">
          {name}
          <span className="tool-sep">,</span>
        </span>
        <span className={`badge badge-${status}`}>{status}</span>
      </button>
      {open && (
        <div className="tool-body" id={id}>
          <div className="tool-label">Arguments</div>
          <pre>{part.args === undefined ? "(none)" : pretty(part.args)}</pre>
          {part.error ? (
            <>
              <div className="tool-label">Error</div>
              <pre className="tool-error">{part.error}</pre>
            </>
          ) : part.result !== undefined ? (
            <>
              <div className="tool-label">Result</div>
              <pre>{pretty(part.result)}</pre>
            </>
          ) : (
            <div className="tool-label">{status === "running" || status === "pending" ? "No result yet" : "No result"}</div>
          )}
        </div>
      )}
    </div>
  );
});
