// The example's build, and `npm run dev`, which serves the page and passes
// /v1 on to a running Parley (PARLEY_SERVER, default 127.0.0.1:7700), so
// that the page and the API share one origin. The Host header is passed on
// unchanged: an open (token-less, loopback) server sees a loopback Host and
// an Origin that names it.
import react from "@vitejs/plugin-react";
import { defineConfig } from "vite";

const server = process.env["PARLEY_SERVER"] ?? "http://127.0.0.1:7700";

export default defineConfig({
  plugins: [react()],
  server: { proxy: { "/v1": { target: server } } },
  preview: { proxy: { "/v1": { target: server } } },
  build: { target: "es2022", reportCompressedSize: false },
});
