// Reads the streams recorded from a real server (testdata/*.jsonl, written
// by `go test ./client -run TestRecordStreams`).

import { readFileSync, readdirSync } from "node:fs";
import { join } from "node:path";
import type { Frame, Guidance, Head, Init, Message, ParleyEvent, QueuedPrompt } from "../src/index.js";

/** The server at one moment it stood still. */
export interface Sample {
  seq: number;
  /** Its messages, in seq order, whole. */
  messages: Message[];
  queue: QueuedPrompt[];
  head: Head;
  guidance: Guidance | null;
  /** The init a subscriber joining then without a position got. */
  init: Init;
}

/** One recorded stream. */
export interface Recording {
  name: string;
  /** What a subscriber that joined at seq 0 got, frame by frame. */
  frames: Frame[];
  /** The index in frames of the event with each seq. */
  frameOf: Map<number, number>;
  samples: Sample[];
  snapshotMessages: number;
}

const dir = new URL("../testdata/", import.meta.url);

/** Every recorded stream. */
export function recordings(): Recording[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith(".jsonl"))
    .sort()
    .map((f) => load(f, readFileSync(join(dir.pathname, f), "utf8")));
}

function load(name: string, text: string): Recording {
  const frames: Frame[] = [];
  const frameOf = new Map<number, number>();
  const samples: Sample[] = [];
  const held = new Map<string, Message>();
  let snapshotMessages = 0;
  for (const line of text.split("\n")) {
    if (line === "") continue;
    const o = JSON.parse(line) as Record<string, unknown>;
    switch (o["kind"]) {
      case "meta":
        snapshotMessages = o["snapshotMessages"] as number;
        break;
      case "frame": {
        const f = toFrame(o["frame"] as Record<string, unknown>);
        if (f.type === "event") frameOf.set(f.event.seq, frames.length);
        frames.push(f);
        break;
      }
      case "sample": {
        for (const m of (o["changed"] as Message[] | null) ?? []) held.set(m.id, m);
        const updated = o["updatedSeq"] as Record<string, number>;
        const messages = (o["messageIds"] as string[]).map((id) => {
          const m: Message = { ...held.get(id)! };
          if (updated[id]) m.updatedSeq = updated[id];
          return m;
        });
        const init = { ...(o["init"] as Init & { type?: string }) };
        delete init.type;
        samples.push({
          seq: o["seq"] as number,
          messages,
          queue: (o["queue"] as QueuedPrompt[] | null) ?? [],
          head: o["head"] as Head,
          guidance: o["guidance"] as Guidance | null,
          init,
        });
        break;
      }
    }
  }
  return { name, frames, frameOf, samples, snapshotMessages };
}

/** A frame as the stream yields it, from its JSON as the server sent it. */
export function toFrame(raw: Record<string, unknown>): Frame {
  switch (raw["type"]) {
    case "init": {
      const init = { ...raw } as unknown as Init & { type?: string };
      delete init.type;
      return { type: "init", init };
    }
    case "guidance":
      return { type: "guidance", guidance: raw["data"] as Guidance };
    default:
      return { type: "event", event: raw as unknown as ParleyEvent };
  }
}

/**
 * A value as JSON with its keys sorted and, as Go's omitempty leaves them
 * out, no undefined, null, false or empty-string fields; a message's
 * `updatedSeq` and `updatedAt` are left out (when its row was last written
 * is the server's business), and its missing parts are no parts.
 */
export function canonical(v: unknown): string {
  return JSON.stringify(normalize(v));
}

function normalize(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(normalize);
  if (typeof v !== "object" || v === null) return v;
  const o = v as Record<string, unknown>;
  const out: Record<string, unknown> = {};
  const isMessage = typeof o["id"] === "string" && typeof o["seq"] === "number" && "role" in o;
  for (const k of Object.keys(o).sort()) {
    const x = o[k];
    if (x === undefined || x === null || x === false || x === "") continue;
    if (isMessage && (k === "updatedSeq" || k === "updatedAt")) continue;
    out[k] = normalize(x);
  }
  if (isMessage && out["parts"] === undefined) out["parts"] = [];
  return out;
}
