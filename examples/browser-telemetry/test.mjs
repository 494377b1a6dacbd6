// Browser telemetry in Chromium against an ursula development node started
// here: the page batches events to its same-origin endpoint, reader.mjs
// replays them by offset and tails new ones live.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { Proc, startDevNode, stopAll, waitFor } from "../lib/processes.mjs";
import { launchChromium, recordConsole, screenshot } from "../lib/browser.mjs";
import { startTelemetryServer } from "./server.mjs";
import { matches, readAll } from "./reader.mjs";

const READER = fileURLToPath(new URL("./reader.mjs", import.meta.url));
const TIMEOUT = 20_000;
let node;
let site;
let browser;
const logs = [];

before(async () => {
  node = await startDevNode();
  site = await startTelemetryServer({ port: 0, ursula: node.url, stream: "telemetry/events", token: undefined });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await site?.close();
  await stopAll();
});

async function readerOutput(args) {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, [READER, "--url", node.url, ...args], {
    timeout: 30_000,
  });
  return { events: stdout.trim() === "" ? [] : stdout.trim().split("\n").map((l) => JSON.parse(l)), stderr };
}

test("the page batches events into the stream; the reader replays and tails them", async () => {
  const page = await browser.newPage({ viewport: { width: 900, height: 640 } });
  recordConsole(page, logs);
  await page.goto(site.url);
  await page.waitForFunction(() => window.telemetry?.stats.queued >= 1, null, { timeout: TIMEOUT }); // navigation

  const recorded = (type, count) =>
    page.waitForFunction(([t, n]) => (window.telemetry.stats.byType[t] ?? 0) >= n, [type, count], { timeout: TIMEOUT });
  await page.click("#add-to-cart");
  await page.click("#add-to-cart");
  await page.click("#load-missing");
  await recorded("network_response", 1); // the 404, before the next click
  await page.click("#throw");
  await recorded("error", 1);
  await page.click("#flush");
  await page.waitForFunction(() => window.telemetry.queue.length === 0 && window.telemetry.stats.flushed >= 7, null, {
    timeout: TIMEOUT,
  });
  const pageOffset = await page.evaluate(() => window.telemetry.stats.lastOffset);
  assert.match(pageOffset, /^\S+$/, "the endpoint passes Stream-Next-Offset on");

  // Replay from the start with the reader, one event per line.
  const { events, stderr } = await readerOutput([]);
  assert.deepEqual(
    events.map((e) => [e.type, e.target ?? e.status ?? null]),
    [
      ["navigation", null],
      ["click", "add-to-cart"],
      ["click", "add-to-cart"],
      ["click", "load-missing"],
      ["network_response", 404],
      ["click", "throw"],
      ["error", null],
    ],
  );
  assert.match(events.at(-1).message, /demo failure/);
  assert.equal(new Set(events.map((e) => e.event_id)).size, events.length, "each event once");
  assert.ok(stderr.includes(`--from ${pageOffset}`), `the reader ends at the page's tail: ${stderr}`);
  const clicks = await readerOutput(["--type", "click"]);
  assert.equal(clicks.events.length, 4);
  // A time window is a filter on captured_at, after reading by offset.
  const future = await readerOutput(["--since", new Date(Date.now() + 3_600_000).toISOString()]);
  assert.equal(future.events.length, 0);

  // Tail live: the reader resumes from the page's offset and sees new events as they commit.
  const follower = new Proc("reader --follow", process.execPath, [READER, "--url", node.url, "--from", pageOffset, "--follow"]);
  try {
    await follower.waitForOutput(/following live/, TIMEOUT);
    await page.click("#add-to-cart");
    await page.click("#flush");
    await follower.waitForOutput(/"type":"click","event_id":"[^"]+","session":"[^"]+","page":"\/","target":"add-to-cart"/, TIMEOUT);
    await screenshot(page, "browser-telemetry");
    // Leaving the page sends what is queued with keepalive.
    await page.goto("about:blank");
    await follower.waitForOutput(/"type":"page_hide"/, TIMEOUT);
  } finally {
    await follower.stop();
  }
  const lines = follower.output.split("\n").filter((l) => l.startsWith("{")).map((l) => JSON.parse(l));
  assert.deepEqual(lines.map((e) => e.type).filter((t) => t !== "visibility"), ["click", "page_hide"]);

  // Whole stream, in commit order; the first seven are what was replayed before.
  const all = await readAll({ url: node.url, stream: "telemetry/events", maxBytes: 200 });
  assert.deepEqual(all.events.slice(0, 7), events, "a replay in small pages (max_bytes) gives the same events");
  assert.equal(all.events.filter((e) => matches(e, { type: "click" })).length, 5);
  assert.deepEqual(logs.filter((l) => l.startsWith("[pageerror]") && !l.includes("demo failure")), []);
});
