import { describe, expect, it } from "vitest";
import { groupRetries } from "../src/index.js";

const m = (id: string, retryOf?: string) => ({ id, retryOf });

describe("groupRetries", () => {
  it("puts each retry with the attempt it retries, through a retry of a retry, under the first attempt", () => {
    const groups = groupRetries([m("q1"), m("a1"), m("a2", "a1"), m("q2"), m("a3", "a2"), m("b1")]);
    expect(groups.map((g) => g.map((x) => x.id))).toEqual([["q1"], ["a1", "a2", "a3"], ["q2"], ["b1"]]);
  });

  it("leaves a message whose retryOf names none of them a group of its own", () => {
    expect(groupRetries([m("a2", "gone"), m("a3", "a2")]).map((g) => g.map((x) => x.id))).toEqual([["a2", "a3"]]);
  });

  it("ends on a loop of retryOf", () => {
    expect(groupRetries([m("x", "y"), m("y", "x")]).flat().map((x) => x.id).sort()).toEqual(["x", "y"]);
  });

  it("keeps the messages' own type", () => {
    const groups = groupRetries([{ id: "a", seq: 1 }, { id: "b", seq: 2, retryOf: "a" }]);
    expect(groups[0]!.map((x) => x.seq)).toEqual([1, 2]);
  });
});
