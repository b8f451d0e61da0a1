// The client knows every event type the server writes: its list is the
// OpenAPI description's, which the server's own tests hold to the list of
// types it writes. A type added to the server and not here fails this.

import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { describe, expect, it } from "vitest";
import { EVENT_TYPES } from "../src/index.js";

interface TypeSchema {
  const?: string;
  enum?: string[];
}
interface Schema {
  oneOf?: { $ref: string }[];
  properties?: { type?: TypeSchema };
}

function serverEventTypes(): string[] {
  const path = resolve(import.meta.dirname, "../../../internal/api/openapi.json");
  const doc = JSON.parse(readFileSync(path, "utf8")) as { components: { schemas: Record<string, Schema> } };
  const schemas = doc.components.schemas;
  const types: string[] = [];
  for (const one of schemas.Event?.oneOf ?? []) {
    const s = schemas[one.$ref.replace("#/components/schemas/", "")];
    if (!s) throw new Error(`Event names ${one.$ref}, which is not a schema`);
    const t = s.properties?.type;
    if (t?.const) types.push(t.const);
    types.push(...(t?.enum ?? []));
  }
  return types.sort();
}

describe("event types", () => {
  it("are the server's, every one", () => {
    const server = serverEventTypes();
    expect(server.length).toBeGreaterThan(10);
    expect([...EVENT_TYPES].sort()).toEqual(server);
  });
});
