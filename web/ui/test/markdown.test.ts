import { describe, expect, it } from "vitest";
import { splitStreaming } from "../src/lib/markdown";

describe("splitStreaming", () => {
  it("cuts at blank lines into finished paragraphs and the tail still growing", () => {
    expect(splitStreaming("one\n\ntwo\n\nthr")).toEqual({ blocks: ["one\n", "two\n"], tail: "thr" });
    expect(splitStreaming("one\n\n\n\ntwo")).toEqual({ blocks: ["one\n"], tail: "two" });
  });
  it("keeps the finished blocks the same as text arrives (so each renders once)", () => {
    const a = splitStreaming("para one\n\npara two grows");
    const b = splitStreaming("para one\n\npara two grows and grows\n\nthree");
    expect(b.blocks[0]).toBe(a.blocks[0]);
  });
  it("does not cut inside a code fence still open", () => {
    const t = "intro\n\n```js\nconst a = 1;\n\nconst b = 2;";
    expect(splitStreaming(t)).toEqual({ blocks: ["intro\n"], tail: "```js\nconst a = 1;\n\nconst b = 2;" });
    expect(splitStreaming(t + "\n```\n\nafter")).toEqual({ blocks: ["intro\n", "```js\nconst a = 1;\n\nconst b = 2;\n```\n"], tail: "after" });
  });
  it("leaves a text without a blank line whole", () => {
    expect(splitStreaming("just a line")).toEqual({ blocks: [], tail: "just a line" });
    expect(splitStreaming("")).toEqual({ blocks: [], tail: "" });
  });
});
