// The package as it is published: `npm pack` (which builds dist/), the
// tarball installed into a project of its own, imported from plain Node
// ESM against the real server, and a TypeScript consumer type-checked
// against its .d.ts files, as a browser project (the DOM's types) and as a
// Node one (@types/node, no DOM) would.

import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { afterAll, beforeAll, describe, expect, inject, it } from "vitest";

const here = resolve(import.meta.dirname, "..");
let dir: string;
let packed: { filename: string; files: { path: string }[] };

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), "parley-client-pack-"));
  const out = execFileSync("npm", ["pack", "--json", "--pack-destination", dir], { cwd: here, encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  packed = (JSON.parse(out) as (typeof packed)[])[0]!;
  writeFileSync(join(dir, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  // Offline: the package has no dependencies to fetch.
  execFileSync("npm", ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", join(dir, packed.filename)], { cwd: dir, stdio: "ignore" });
}, 180_000);

afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("the package as published", () => {
  it("holds the built ESM, its types, the sources they map to and the README, and no tests", () => {
    const files = packed.files.map((f) => f.path);
    for (const f of ["package.json", "README.md", "dist/index.js", "dist/index.d.ts", "dist/streamed.js", "src/index.ts"]) expect(files).toContain(f);
    expect(files.filter((f) => !/^(dist|src)\//.test(f)).sort()).toEqual(["README.md", "package.json"]);
    const pkg = JSON.parse(readFileSync(join(dir, "node_modules/@parleyhq/client/package.json"), "utf8")) as Record<string, unknown>;
    expect(pkg["type"]).toBe("module");
    expect(pkg["exports"]).toEqual({ ".": { types: "./dist/index.d.ts", import: "./dist/index.js" } });
    expect(pkg["dependencies"]).toBeUndefined();
    expect(pkg["repository"]).toMatchObject({ type: "git", directory: "web/client" });
  });

  it("is imported from plain Node ESM, and talks to the server", () => {
    const script = `
      import { ParleyClient, emptyState, foldFrame } from "@parleyhq/client";
      const c = new ParleyClient({ baseUrl: process.argv[2] });
      const v = await c.createConversation({ title: "packed", participants: ["alice"] });
      await c.postMessage(v.conversation.id, { agentId: "alice", content: "hello from the tarball", finality: "turn" });
      const sub = c.subscribe(v.conversation.id);
      for await (const frame of sub) {
        const s = foldFrame(emptyState, frame);
        console.log(JSON.stringify({ title: s.conversation.title, messages: s.messages.map((m) => m.content), streaming: s.streaming }));
        break;
      }
      sub.close();
    `;
    writeFileSync(join(dir, "consumer.mjs"), script);
    const out = execFileSync("node", ["consumer.mjs", inject("serverUrl")], { cwd: dir, encoding: "utf8" });
    expect(JSON.parse(out)).toEqual({ title: "packed", messages: ["hello from the tarball"], streaming: [] });
  });

  it.each([
    ["a browser project", { lib: ["ES2022", "DOM"], types: [] }],
    ["a Node project", { lib: ["ES2022"], types: ["node"], typeRoots: [join(here, "node_modules/@types")] }],
  ])("type-checks in %s against its .d.ts", (_what, opts) => {
    writeFileSync(
      join(dir, "consumer.ts"),
      `import { ParleyClient, emptyState, foldFrame, type ConversationState, type Frame, type StreamingText } from "@parleyhq/client";
const client = new ParleyClient({ baseUrl: "http://127.0.0.1:7700" });
export async function title(id: string): Promise<string> {
  return (await client.conversation(id)).conversation.title ?? "";
}
export function fold(frames: Frame[]): ConversationState {
  return frames.reduce(foldFrame, emptyState);
}
export const streaming: readonly StreamingText[] = emptyState.streaming;
// @ts-expect-error: the types are the package's, not any: an id is a string
void client.conversation(42);
`,
    );
    // Strict, and the package's .d.ts files checked too (no skipLibCheck).
    const compilerOptions = { target: "ES2022", module: "NodeNext", moduleResolution: "NodeNext", strict: true, noEmit: true, ...opts };
    writeFileSync(join(dir, "tsconfig.json"), JSON.stringify({ compilerOptions, files: ["consumer.ts"] }));
    const tsc = join(here, "node_modules/.bin/tsc");
    let out = "";
    try {
      execFileSync(tsc, ["-p", dir], { cwd: dir, encoding: "utf8" });
    } catch (err) {
      out = String((err as { stdout?: string }).stdout ?? err);
    }
    expect(out).toBe("");
  });
});
