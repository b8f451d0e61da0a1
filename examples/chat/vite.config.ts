// The example's build, and `npm run dev`, which serves the page and passes
// /v1 on to a running Parley (PARLEY_SERVER, default 127.0.0.1:7700), so
// that the page and the API share one origin. The Host header is passed on
// unchanged: an open (token-less, loopback) server sees a loopback Host and
// an Origin that names it.
//
// @parleyhq/client (the page groups a failed-over answer's attempts with its
// groupRetries) is compiled from its sources in web/client (the alias below,
// and "paths" in tsconfig.json), as the web UI does: nothing to build first.
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));

const server = process.env["PARLEY_SERVER"] ?? "http://127.0.0.1:7700";

export default defineConfig({
  plugins: [react()],
  resolve: { alias: { "@parleyhq/client": here("../../web/client/src/index.ts") } },
  server: { proxy: { "/v1": { target: server } } },
  preview: { proxy: { "/v1": { target: server } } },
  build: { target: "es2022", reportCompressedSize: false },
});
