import { memo, useEffect, useMemo, useRef, useState } from "react";
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

/** The narrowest and widest a lane is drawn, and the flow box's padding left and right (styles.css: .flow). */
const MIN_LANE = 52;
const MAX_LANE = 76;
const FLOW_PADDING = 16;

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
  const box = useRef<HTMLDivElement>(null);
  // The lanes share the box's width (from MIN_LANE to MAX_LANE each): beyond what fits at MIN_LANE, the picture scrolls sideways.
  const [boxWidth, setBoxWidth] = useState(0);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const measure = () => setBoxWidth(el.clientWidth - FLOW_PADDING);
    measure();
    const ro = new ResizeObserver(measure);
    ro.observe(el);
    return () => ro.disconnect();
  }, []);
  const layout = useMemo(() => layoutFlow(p.events, { agents: p.agents, laneWidth: MAX_LANE }), [p.events, p.agents]);
  const laneCount = Math.max(1, layout.lanes.length);
  const laneWidth = boxWidth > 0 ? Math.max(MIN_LANE, Math.min(MAX_LANE, Math.floor(boxWidth / laneCount))) : MAX_LANE;
  /** Where lane i is drawn across. */
  const lx = (i: number) => i * laneWidth + laneWidth / 2;
  // A lane's name is cut to what its lane holds (about 5.8 px a letter at 11 px), whole in its title.
  const nameChars = Math.max(4, Math.floor((laneWidth - 6) / 5.8));
  const stick = useRef(true);
  useEffect(() => {
    const el = box.current;
    if (el && stick.current) el.scrollTop = el.scrollHeight;
  }, [layout.height]);
  const { lanes, blocks, arrows, marks } = layout;
  const w = laneCount * laneWidth;
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
              <text key={l.agent} x={lx(l.index)} y={15} textAnchor="middle" className="lane-name">
                {l.agent.length > nameChars ? l.agent.slice(0, nameChars - 1) + "…" : l.agent}
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
            <line key={l.agent} x1={lx(l.index)} x2={lx(l.index)} y1={0} y2={h} className="lane-line">
              <title>{l.agent}</title>
            </line>
          ))}
          {blocks.map((b) => {
            const x = lx(b.lane);
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
            const x0 = lx(a.from);
            const x1 = lx(a.to);
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
            const x = lx(m.lane) + Math.min(20, laneWidth / 2 - 6);
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
