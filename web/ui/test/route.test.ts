import { describe, expect, it } from "vitest";
import { listQuery, parseListFilters } from "../src/lib/route";

describe("the list's filters in the URL", () => {
  it("round-trip through the query, metadata keys with dots and values with & included", () => {
    const f = { title: "plan & co", mine: true, participant: "writer", metadata: [["team", "red"], ["a.b", "x=y&z"]] as [string, string][] };
    const q = listQuery(f);
    expect(q).toBe("?title=plan+%26+co&mine=1&participant=writer&metadata.team=red&metadata.a.b=x%3Dy%26z");
    expect(parseListFilters(q)).toEqual(f);
  });
  it("reads nothing from an empty query, and no more metadata filters than the server takes", () => {
    expect(parseListFilters("")).toEqual({ title: "", mine: false, participant: "", metadata: [] });
    expect(listQuery(parseListFilters(""))).toBe("");
    const many = parseListFilters("?metadata.a=1&metadata.b=2&metadata.c=3&metadata.d=4&metadata.e=5&metadata.=x&mine=yes");
    expect(many.metadata).toEqual([["a", "1"], ["b", "2"], ["c", "3"], ["d", "4"]]);
    expect(many.mine).toBe(false);
  });
});
