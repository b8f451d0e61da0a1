// The UI's build: the single-page application into internal/webui/dist at the
// repository root (index.html and hashed files under /assets/), which the
// parley binary embeds and serves at / and /c/{id}.
//
// @parleyhq/client is compiled from its TypeScript sources (the alias
// below, and "paths" in tsconfig.json): the UI needs no build of the client
// first, and a change to the client's sources changes the UI's build, which
// the staleness check of ./scripts/test then notices.
import { fileURLToPath } from "node:url";
import react from "@vitejs/plugin-react";
import { defineConfig } from "vitest/config";

const here = (p: string): string => fileURLToPath(new URL(p, import.meta.url));

// `npm run dev` proxies the API to a running `parley serve` or `parley demo`
// (PARLEY_SERVER, default 127.0.0.1:7700). The Host header is passed on, so
// an open server sees a loopback Host and an Origin that names it.
const server = process.env["PARLEY_SERVER"] ?? "http://127.0.0.1:7700";
const proxy = {
  "/v1": { target: server, ws: true },
  "/healthz": { target: server },
};

export default defineConfig({
  plugins: [react()],
  base: "/",
  resolve: {
    alias: { "@parleyhq/client": here("../client/src/index.ts") },
  },
  build: {
    outDir: here("../../internal/webui/dist"),
    emptyOutDir: true,
    // The server's Content-Security-Policy allows no data: URLs and no inline script or style.
    assetsInlineLimit: 0,
    modulePreload: { polyfill: false },
    sourcemap: false,
    target: "es2022",
    reportCompressedSize: false,
  },
  server: { proxy },
  // `npm run preview` serves the build as the parley binary does, with its Content-Security-Policy.
  preview: {
    proxy,
    headers: {
      "Content-Security-Policy":
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; font-src 'self'; connect-src 'self'; manifest-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'",
    },
  },
  test: {
    include: ["test/**/*.test.ts"],
  },
});
