// Checks that the committed build (internal/webui/dist) is what the sources give:
// builds into a temporary directory and compares every file, byte for byte.
// ./scripts/test runs it; CI fails when the build is stale.
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";
import { build } from "vite";

const committed = fileURLToPath(new URL("../../../internal/webui/dist", import.meta.url));
const tmp = mkdtempSync(join(tmpdir(), "parley-ui-"));

function files(dir) {
  const out = [];
  const walk = (d) => {
    for (const name of readdirSync(d)) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.push(relative(dir, p));
    }
  };
  walk(dir);
  return out.sort();
}

try {
  await build({ logLevel: "warn", build: { outDir: tmp, emptyOutDir: true } });
  const want = files(tmp);
  let have = [];
  try {
    have = files(committed);
  } catch {
    // no build committed
  }
  const problems = [];
  for (const f of want) {
    if (!have.includes(f)) problems.push(`missing: webui/dist/${f}`);
    else if (!readFileSync(join(tmp, f)).equals(readFileSync(join(committed, f)))) problems.push(`differs: webui/dist/${f}`);
  }
  for (const f of have) if (!want.includes(f)) problems.push(`not made by the sources: webui/dist/${f}`);
  if (problems.length > 0) {
    console.error(problems.join("\n"));
    console.error("internal/webui/dist is stale: run `npm run build` in web/ui and commit internal/webui/dist.");
    process.exitCode = 1;
  } else {
    console.log(`webui/dist matches its sources (${want.length} files)`);
  }
} finally {
  rmSync(tmp, { recursive: true, force: true });
}
