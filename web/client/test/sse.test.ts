import { describe, expect, it } from "vitest";
import { FrameTooLargeError, SSEParser, backoffDelay, type SSEMessage } from "../src/index.js";

const enc = new TextEncoder();

const stream =
  ": hello\n\n" +
  "id: 51294980:12\nevent: init\ndata: {\"type\":\"init\",\"t\":\"ünï€ode 😀\"}\n\n" +
  "event: guidance\r\ndata: {\"a\":1}\r\n\r\n" +
  ": ping\n\n" +
  "data: line one\ndata:line two\n\n" +
  "event: message\ndata: {}\nretry: 5\nunknown\n\n";

const want: SSEMessage[] = [
  { event: "init", data: '{"type":"init","t":"ünï€ode 😀"}', id: "51294980:12" },
  { event: "guidance", data: '{"a":1}' },
  { event: "", data: "line one\nline two" },
  { event: "message", data: "{}" },
];

describe("SSEParser", () => {
  it("parses a stream however it is cut into chunks", () => {
    const bytes = enc.encode(stream);
    for (let cut = 0; cut <= bytes.length; cut++) {
      for (const step of [1, 3, 7]) {
        const p = new SSEParser(1 << 20);
        const got: SSEMessage[] = [];
        got.push(...p.push(bytes.slice(0, cut)));
        for (let i = cut; i < bytes.length; i += step) got.push(...p.push(bytes.slice(i, i + step)));
        expect(got, `cut at ${cut}, then ${step} bytes at a time`).toEqual(want);
      }
    }
  });

  it("refuses an event over its bound, counting the lines as they come", () => {
    const p = new SSEParser(100);
    expect(p.push(enc.encode("data: " + "x".repeat(80) + "\n\n"))).toHaveLength(1);
    const q = new SSEParser(100);
    q.push(enc.encode("data: " + "x".repeat(60) + "\n"));
    expect(() => q.push(enc.encode("data: " + "y".repeat(60)))).toThrow(FrameTooLargeError);
    // a line that never ends is refused too, before its end
    const r = new SSEParser(100);
    expect(() => {
      for (let i = 0; i < 20; i++) r.push(enc.encode("z".repeat(10)));
    }).toThrow(FrameTooLargeError);
  });

  it("holds no more than one event: many events in a row are each under the bound", () => {
    const p = new SSEParser(64);
    let n = 0;
    for (let i = 0; i < 1000; i++) n += p.push(enc.encode(`: ping\n\nevent: e\ndata: ${i}\n\n`)).length;
    expect(n).toBe(1000);
  });
});

describe("backoffDelay", () => {
  it("doubles from the least wait to the most, in the upper half of each with jitter", () => {
    const lo = () => 0;
    const hi = () => 0.999999;
    expect(backoffDelay(0, 100, 5000, lo)).toBe(50);
    expect(backoffDelay(0, 100, 5000, hi)).toBeCloseTo(100, 3);
    expect(backoffDelay(1, 100, 5000, hi)).toBeCloseTo(200, 3);
    expect(backoffDelay(3, 100, 5000, lo)).toBe(400);
    expect(backoffDelay(6, 100, 5000, hi)).toBeCloseTo(5000, 2);
    expect(backoffDelay(1000, 100, 5000, hi)).toBeLessThanOrEqual(5000);
    expect(backoffDelay(1000, 100, 5000, lo)).toBe(2500);
    const seen = new Set(Array.from({ length: 50 }, () => backoffDelay(4, 100, 5000)));
    expect(seen.size).toBeGreaterThan(40); // jitter: clients cut off together spread out
    for (const d of seen) expect(d >= 800 && d <= 1600).toBe(true);
  });
});
