import { memo, useEffect, useMemo, useRef } from "react";
import type { ParleyEvent } from "@parleyhq/client";
import { layoutFlow, type Block } from "../lib/flow";

export interface FlowViewProps {
  events: readonly ParleyEvent[];
  agents: readonly string[];
  /** The window starts after this seq (0: at the log's start). */
  after: number;
  loading: boolean;
  onEarlier: () => void;
  onJump: (messageId: string) => void;
}

const END_TEXT: Record<Block["end"], string> = {
  open: "open",
  closed: "closed",
  aborted: "aborted",
  canceled: "stopped",
  error: "failed",
  continued: "continued",
};

/**
 * The picture of the conversation (SVG): a lane per agent, a block per turn
 * of each agent in the order of the log, arrows for delegations (dashed)
 * and replies between agents, and marks for claims, resets, aborts,
 * reverts and task runs. A block is a button: it shows its first message.
 * While the reader is at the bottom, it follows what is added.
 */
export const FlowView = memo(function FlowView(p: FlowViewProps) {
  const layout = useMemo(() => layoutFlow(p.events, { agents: p.agents, laneWidth: 76 }), [p.events, p.agents]);
  const box = useRef<HTMLDivElement>(null);
  const stick = useRef(true);
  useEffect(() => {
    const el = box.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [layout.height]);
  const { lanes, blocks, arrows, marks } = layout;
  const w = layout.width;
  const h = layout.height;
  // The legend is below the scrolling picture, not in it: it does not move as the picture grows.
  return (
    <div className="flow-view">
      <div className="flow" ref={box} onScroll={(e) => {
        const el = e.currentTarget;
        stick.current = el.scrollHeight - el.scrollTop - el.clientHeight < 24;
      }}>
        {p.after > 0 && (
          <button type="button" className="linkish flow-earlier" onClick={p.onEarlier} disabled={p.loading}>
            {p.loading ? "Loading…" : "Show earlier"}
          </button>
        )}
        {blocks.length === 0 && !p.loading && <p className="muted">{p.after > 0 ? "No turn in the latest part of the log." : "Nothing has happened yet."}</p>}
        <div className="flow-lanes">
          <svg width={w} height={22} aria-hidden="true">
            {lanes.map((l) => (
              <text key={l.agent} x={l.x} y={15} textAnchor="middle" className="lane-name">
                {l.agent.length > 10 ? l.agent.slice(0, 9) + "…" : l.agent}
              </text>
            ))}
          </svg>
        </div>
        <svg className="flow-svg" width={w} height={h} viewBox={`0 0 ${w} ${h}`} role="group" aria-label="Flow of the conversation">
          <defs>
            <marker id="arrow-reply" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M0,0 L8,4 L0,8 z" className="arrowhead-reply" />
            </marker>
            <marker id="arrow-delegation" viewBox="0 0 8 8" refX="7" refY="4" markerWidth="7" markerHeight="7" orient="auto-start-reverse">
              <path d="M0,0 L8,4 L0,8 z" className="arrowhead-delegation" />
            </marker>
          </defs>
          {lanes.map((l) => (
            <line key={l.agent} x1={l.x} x2={l.x} y1={0} y2={h} className="lane-line">
              <title>{l.agent}</title>
            </line>
          ))}
          {blocks.map((b) => {
            const x = lanes[b.lane]!.x;
            const bw = b.delegate ? 20 : 28;
            const gone = b.messages > 0 && b.removed >= b.messages;
            const name = `Turn ${b.turn} · ${b.agent}${b.delegate ? " (delegated)" : ""} · ${END_TEXT[b.end]}${gone ? " · reverted" : ""}`;
            const jump = b.messageId !== undefined && b.removed < b.messages ? b.messageId : undefined;
            return (
              <g
                key={b.key}
                className={`block block-${b.end}${b.delegate ? " block-delegate" : ""}${jump ? " block-link" : ""}${gone ? " block-removed" : ""}`}
                role={jump ? "button" : undefined}
                tabIndex={jump ? 0 : undefined}
                aria-label={jump ? name : undefined}
                onClick={jump ? () => p.onJump(jump) : undefined}
                onKeyDown={
                  jump
                    ? (e) => {
                        if (e.key === "Enter" || e.key === " ") {
                          e.preventDefault();
                          p.onJump(jump);
                        }
                      }
                    : undefined
                }
              >
                <title>{name}</title>
                <rect x={x - bw / 2} y={b.y0 + 1} width={bw} height={Math.max(6, b.y1 - b.y0 - 2)} rx={4} />
                {b.y1 - b.y0 >= 16 && (
                  <text x={x} y={b.y0 + 13} textAnchor="middle" className="block-label">
                    {b.turn}
                  </text>
                )}
              </g>
            );
          })}
          {arrows.map((a) => {
            const x0 = lanes[a.from]!.x;
            const x1 = lanes[a.to]!.x;
            const dir = x1 >= x0 ? 1 : -1;
            const d =
              a.kind === "delegation" || a.y0 === a.y1
                ? `M${x0 + dir * 16},${a.y0} L${x1 - dir * 12},${a.y1}`
                : `M${x0 + dir * 16},${a.y0} C${(x0 + x1) / 2},${a.y0} ${(x0 + x1) / 2},${a.y1} ${x1 - dir * 16},${a.y1}`;
            return (
              <path key={a.key} d={d} className={`arrow arrow-${a.kind}`} markerEnd={`url(#arrow-${a.kind})`}>
                <title>{a.kind === "delegation" ? `${lanes[a.from]!.agent} delegated to ${lanes[a.to]!.agent}` : `${lanes[a.to]!.agent} replied to ${lanes[a.from]!.agent}`}</title>
              </path>
            );
          })}
          {marks.map((m) => {
            const x = lanes[m.lane]!.x + 20;
            return (
              <g key={m.key} className={`flow-mark mark-${m.kind}`}>
                <title>{m.label}</title>
                <path d={`M${x},${m.y - 5} L${x + 5},${m.y} L${x},${m.y + 5} L${x - 5},${m.y} z`} />
              </g>
            );
          })}
        </svg>
      </div>
      <ul className="flow-legend" aria-label="Legend">
        <li><span className="key key-closed" /> turn</li>
        <li><span className="key key-open" /> open</li>
        <li><span className="key key-canceled" /> stopped / failed</li>
        <li><span className="key key-delegation" /> delegation</li>
        <li><span className="key key-mark" /> claim, reset, abort, revert</li>
      </ul>
    </div>
  );
});
