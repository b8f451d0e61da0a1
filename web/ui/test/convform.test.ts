import { describe, expect, it } from "vitest";
import type { Conversation } from "@parleyhq/client";
import { fieldsOf, formatMetadata, newConversationOf, parseMetadata, parseNames, patchOf } from "../src/lib/convform";

const conv: Conversation = {
  id: "c1",
  epoch: "e",
  title: "review",
  participants: ["alice", "bob"],
  members: ["carol"],
  turnPolicy: "round-robin",
  messageFormat: "v2",
  metadata: { team: "infra", n: 3 },
  createdAt: "2026-12-05T00:00:00Z",
};

describe("parseNames", () => {
  it("splits on commas, spaces and lines, each name once", () => {
    expect(parseNames(" alice, bob\ncarol  alice,,")).toEqual({ names: ["alice", "bob", "carol"] });
  });
  it("names the first that is not an agent id", () => {
    expect(parseNames("alice, b/ob, ..").bad).toBe("b/ob");
    expect(parseNames("..").bad).toBe("..");
  });
});

describe("metadata lines", () => {
  it("reads text as text and JSON as JSON", () => {
    expect(parseMetadata("team = infra\nn=3\nflag = true\nobj = {\"a\":1}\nodd = {not json")).toEqual({
      value: { team: "infra", n: 3, flag: true, obj: { a: 1 }, odd: "{not json" },
    });
  });
  it("refuses a line without a key", () => {
    expect(parseMetadata("= x").bad).toBe("= x");
    expect(parseMetadata("just words").bad).toBe("just words");
  });
  it("round-trips through the form, a text that looks like a number staying text", () => {
    const m = { team: "infra", n: 3, zip: "0123", yes: "true" };
    expect(parseMetadata(formatMetadata(m)).value).toEqual(m);
  });
});

describe("newConversationOf", () => {
  it("makes the body, leaving out what is empty", () => {
    const f = { ...fieldsOf(), title: " plan ", participants: "alice bob", turnPolicy: "free" as const };
    expect(newConversationOf(f)).toEqual({ ok: true, value: { title: "plan", participants: ["alice", "bob"], turnPolicy: "free", messageFormat: "v2" } });
  });
  it("says which field is wrong", () => {
    expect(newConversationOf({ ...fieldsOf(), members: "a b!" })).toMatchObject({ ok: false, field: "members" });
  });
});

describe("patchOf", () => {
  it("is null when nothing changed", () => {
    expect(patchOf(conv, fieldsOf(conv))).toEqual({ ok: true, value: null });
  });
  it("holds only what changed: names added and removed, keys set and removed", () => {
    const f = { ...fieldsOf(conv), title: "review 2", participants: "bob, dave", members: "carol", metadata: "n = 4\nnew = x" };
    expect(patchOf(conv, f)).toEqual({
      ok: true,
      value: { title: "review 2", participants: { add: ["dave"], remove: ["alice"] }, metadata: { team: null, n: 4, new: "x" } },
    });
  });
});
