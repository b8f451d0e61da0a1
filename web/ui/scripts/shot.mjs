// Development aid: screenshots of the UI in Debian's Chromium, to look at
// the layout (node scripts/shot.mjs URL OUT.png [width] [height] [actions]).
import { chromium } from "playwright-core";

const [url, out, width = "1280", height = "800", wait = "2500"] = process.argv.slice(2);
const browser = await chromium.launch({ executablePath: "/usr/bin/chromium", args: ["--no-sandbox"] });
const page = await browser.newPage({ viewport: { width: Number(width), height: Number(height) } });
const logs = [];
page.on("console", (m) => logs.push(`${m.type()}: ${m.text()}`));
page.on("pageerror", (e) => logs.push(`pageerror: ${e.message}`));
await page.goto(url);
await page.waitForTimeout(Number(wait));
await page.screenshot({ path: out });
const scroll = await page.evaluate(() => ({ sw: document.documentElement.scrollWidth, cw: document.documentElement.clientWidth }));
console.log(JSON.stringify(scroll));
for (const l of logs) console.log(l);
await browser.close();
