import { describe, expect, it } from "vitest";
import type { InputRequestPart } from "@parleyhq/client";
import { answerText, formAnswer, outcomeText, requestTitle, schemaForm } from "../src/lib/inputs";

const part = (p: Partial<InputRequestPart>): InputRequestPart => ({ type: "input-request", requestId: "r1", kind: "question", status: "pending", ...p });

describe("schemaForm", () => {
  it("draws an object of simple properties as a field each, with its label, description and whether it is required", () => {
    const form = schemaForm({
      type: "object",
      required: ["region"],
      properties: {
        region: { type: "string", enum: ["eu", "us"], title: "Region" },
        replicas: { type: "integer", description: "How many" },
        ratio: { type: "number" },
        canary: { type: "boolean" },
        note: { type: "string" },
        essay: { type: "string", format: "textarea" },
      },
    });
    expect(form).toEqual({
      object: true,
      fields: [
        { name: "region", label: "Region", kind: "enum", choices: ["eu", "us"], required: true },
        { name: "replicas", label: "replicas", description: "How many", kind: "integer", required: false },
        { name: "ratio", label: "ratio", kind: "number", required: false },
        { name: "canary", label: "canary", kind: "boolean", required: false },
        { name: "note", label: "note", kind: "string", required: false },
        { name: "essay", label: "essay", kind: "text", required: false },
      ],
    });
  });

  it("draws a schema of one value as one field, and gives up on anything nested", () => {
    expect(schemaForm({ type: "number", title: "Budget" })).toEqual({ object: false, fields: [{ name: "", label: "Budget", kind: "number", required: true }] });
    expect(schemaForm({ type: "object", properties: { tags: { type: "array", items: { type: "string" } } } })).toBeNull();
    expect(schemaForm({ anyOf: [{ type: "string" }] })).toBeNull();
    expect(schemaForm("nope")).toBeNull();
    expect(schemaForm({ type: "object", properties: {} })).toBeNull();
  });
});

describe("formAnswer", () => {
  const form = schemaForm({
    type: "object",
    required: ["region", "replicas"],
    properties: { region: { enum: ["eu", "us"] }, replicas: { type: "integer" }, canary: { type: "boolean" }, note: { type: "string" } },
  })!;

  it("makes the answer of the values: numbers as numbers, an enum's choice, booleans, and empty optional fields left out", () => {
    expect(formAnswer(form, { region: "1", replicas: "3", canary: true, note: "" })).toEqual({ answer: { region: "us", replicas: 3, canary: true } });
    expect(formAnswer(form, { region: "0", replicas: "1" })).toEqual({ answer: { region: "eu", replicas: 1, canary: false } });
  });

  it("says what is wrong: a required field empty, a number that is none, a fraction where a whole number goes", () => {
    expect(formAnswer(form, { replicas: "3" })).toEqual({ error: "region is required." });
    expect(formAnswer(form, { region: "0", replicas: "x" })).toEqual({ error: "replicas must be a whole number." });
    expect(formAnswer(form, { region: "0", replicas: "1.5" })).toEqual({ error: "replicas must be a whole number." });
  });

  it("answers a one-value schema with the value itself", () => {
    expect(formAnswer(schemaForm({ type: "string" })!, { "": "hello" })).toEqual({ answer: "hello" });
  });
});

describe("how a request is told", () => {
  const now = new Date("2026-12-05T12:00:00Z");
  it("says who answered and how", () => {
    const at = "2026-12-05T11:58:00Z";
    const approved = part({ kind: "approval", status: "answered", answer: { approved: true }, answeredBy: "alice", answeredAt: at });
    expect(outcomeText(approved, now)).toMatch(/^Approved by alice at /);
    const denied = part({ kind: "approval", status: "answered", answer: { approved: false, reason: "not on a Friday" }, answeredBy: "alice", answeredAt: at });
    expect(outcomeText(denied, now)).toMatch(/^Denied by alice at /);
    expect(answerText(denied)).toBe("Denied: not on a Friday");
    expect(answerText(part({ status: "answered", answer: { choices: ["eu", "us"] } }))).toBe("eu, us");
    expect(answerText(part({ status: "answered", answer: { text: "soon" } }))).toBe("soon");
    expect(answerText(part({ status: "answered", answer: { region: "eu", replicas: 3, canary: true } }))).toBe("region: eu · replicas: 3 · canary: yes");
    expect(answerText(part({ status: "answered", answer: { tags: ["a", "b"] } }))).toBe('{"tags":["a","b"]}');
    expect(answerText(part({ status: "answered", answer: 42 }))).toBe("42");
  });

  it("says that a request expired or was canceled, and why", () => {
    expect(outcomeText(part({ status: "expired" }), now)).toBe("Expired unanswered");
    expect(outcomeText(part({ status: "canceled", reason: "stopped" }), now)).toBe("Canceled (stopped)");
    expect(outcomeText(part({}), now)).toBe("Waiting for an answer");
  });

  it("titles a request by its own title, or by its tool", () => {
    expect(requestTitle({ kind: "approval", toolName: "deploy" })).toBe("Approve deploy?");
    expect(requestTitle({ kind: "approval", title: "Ship?" })).toBe("Ship?");
    expect(requestTitle({ kind: "question" })).toBe("A question");
  });
});
