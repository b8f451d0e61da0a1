// What the browser test runs: `parley serve` (open: token-less, on
// loopback), the built page served with /v1 passed on to it (as `npm run
// dev` does), and the agent "helper" as a runner, of one conversation or agent-wide.

import { spawn } from "node:child_process";
import { createReadStream, existsSync, mkdtempSync } from "node:fs";
import { createServer, request, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { tmpdir } from "node:os";
import { extname, join, resolve } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { afterAll, beforeAll, inject } from "vitest";
import WebSocket from "ws";

const chromiumPath = process.env["PARLEY_CHROMIUM"] ?? "/usr/bin/chromium";

/** What a browser test file uses: Parley, the page served, and Chromium. */
export interface Fixture {
  browser: Browser;
  parley: Awaited<ReturnType<typeof startParley>>;
  page: Awaited<ReturnType<typeof startPage>>;
}

/** Starts the fixture before the file's tests and stops it after them; its fields are set once they run. */
export function browserFixture(): Fixture {
  const f = {} as Fixture;
  beforeAll(async () => {
    if (!existsSync(chromiumPath)) throw new Error(`no Chromium at ${chromiumPath}: install Debian's chromium package (./.ci/run does), or set PARLEY_CHROMIUM`);
    f.parley = await startParley(inject("parleyBinary"));
    f.page = await startPage(f.parley.addr);
    // --no-sandbox: CI runs as root, where Chromium's sandbox refuses to start.
    f.browser = await chromium.launch({ executablePath: chromiumPath, args: ["--no-sandbox"] });
  });
  afterAll(async () => {
    await f.browser?.close();
    f.page?.server.close();
    await f.parley?.stop();
  });
  return f;
}

/** Starts `parley serve` on a free loopback port; its address and a stop. */
export async function startParley(binary: string): Promise<{ addr: string; stop(): Promise<void> }> {
  const db = join(mkdtempSync(join(tmpdir(), "parley-example-")), "parley.db");
  const child = spawn(binary, ["serve", "-db", db, "-addr", "127.0.0.1:0"], { stdio: ["ignore", "ignore", "pipe"] });
  const exited = new Promise<void>((r) => child.once("exit", () => r()));
  let log = "";
  const addr = await new Promise<string>((resolve, reject) => {
    child.stderr.on("data", (b: Buffer) => {
      log += b.toString();
      const m = /msg="parley serving" addr=(\S+)/.exec(log);
      if (m) resolve(m[1]!);
    });
    child.once("exit", (code) => reject(new Error(`parley exited with ${code}:\n${log}`)));
  });
  return {
    addr,
    stop: async () => {
      child.kill("SIGTERM");
      await exited;
    },
  };
}

const types: Record<string, string> = { ".html": "text/html", ".js": "text/javascript", ".css": "text/css", ".svg": "image/svg+xml" };

/** Serves dist/ and passes /v1 on to Parley at addr, Host header and all. */
export async function startPage(addr: string): Promise<{ url: string; server: Server }> {
  const dist = resolve(import.meta.dirname, "../dist");
  const [host, port] = [addr.slice(0, addr.lastIndexOf(":")), Number(addr.slice(addr.lastIndexOf(":") + 1))];
  const server = createServer((req, res) => {
    const path = (req.url ?? "/").split("?")[0]!;
    if (path.startsWith("/v1/")) {
      const up = request({ host, port, path: req.url, method: req.method, headers: req.headers }, (ur) => {
        res.writeHead(ur.statusCode ?? 502, ur.headers);
        ur.pipe(res);
      });
      up.on("error", () => res.destroy());
      req.pipe(up);
      res.on("close", () => up.destroy());
      return;
    }
    const file = join(dist, path === "/" ? "index.html" : path);
    if (!file.startsWith(dist) || !existsSync(file)) {
      res.writeHead(404).end();
      return;
    }
    res.writeHead(200, { "Content-Type": types[extname(file)] ?? "application/octet-stream" });
    createReadStream(file).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, "127.0.0.1", r));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server };
}

type Frame = Record<string, unknown>;

/**
 * The agent "helper" as a runner (an open server acts as admin): attached to
 * one conversation, or agent-wide, to every conversation it is asked in,
 * where each frame it sends names the conversation of the last prompt.
 */
export class Runner {
  private readonly pushes: Frame[] = [];
  private readonly waiting: ((f: Frame) => void)[] = [];
  private readonly replies: ((f: Frame) => void)[] = [];
  /** On an agent-wide connection, the conversation of the last prompt taken. */
  private conversation = "";
  private constructor(
    private readonly ws: WebSocket,
    private readonly wide: boolean,
  ) {
    ws.on("message", (data) => {
      const f = JSON.parse((data as Buffer).toString()) as Frame;
      if (f["type"] === "ack" || (f["type"] === "error" && this.replies.length > 0)) this.replies.shift()?.(f);
      else if (this.waiting.length > 0) this.waiting.shift()?.(f);
      else this.pushes.push(f);
    });
  }

  static attach(addr: string, conversation: string): Promise<Runner> {
    return Runner.open(`ws://${addr}/v1/conversations/${conversation}/runner?agentId=helper`, false);
  }

  /** One connection for every conversation in which helper is asked, those not made yet included. */
  static attachAgent(addr: string): Promise<Runner> {
    return Runner.open(`ws://${addr}/v1/agents/helper/runner`, true);
  }

  private static async open(url: string, wide: boolean): Promise<Runner> {
    const ws = new WebSocket(url);
    const r = new Runner(ws, wide);
    await new Promise<void>((resolve, reject) => {
      ws.once("open", () => resolve());
      ws.once("error", reject);
    });
    return r;
  }

  async next(): Promise<Frame> {
    const f = this.pushes.shift() ?? (await new Promise<Frame>((r) => this.waiting.push(r)));
    if (this.wide && f["type"] === "prompt") this.conversation = f["conversationId"] as string;
    return f;
  }

  async send(frame: Frame): Promise<void> {
    const reply = new Promise<Frame>((r) => this.replies.push(r));
    this.ws.send(JSON.stringify(this.wide ? { ...frame, conversationId: this.conversation } : frame));
    const r = await reply;
    if (r["type"] !== "ack") throw new Error(`runner frame ${JSON.stringify(frame)}: ${JSON.stringify(r)}`);
  }

  close(): void {
    this.ws.close();
  }
}
