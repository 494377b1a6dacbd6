// The chat room in Chromium against an ursula development node started
// here: two people chat live, a third joins late and replays the history,
// and a message from another writer (not a page) shows everywhere.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { startDevNode, startGateway, stopAll } from "../lib/processes.mjs";
import { launchChromium, recordConsole, screenshot } from "../lib/browser.mjs";
import { startChatServer } from "./server.mjs";

const TIMEOUT = 20_000;
let node;
let site;
let browser;
const logs = [];

before(async () => {
  node = await startDevNode();
  site = await startChatServer({ port: 0, ursula: node.url, room: "chat/room-7" });
  browser = await launchChromium();
});
after(async () => {
  await browser?.close();
  await site?.close();
  await stopAll();
});

async function join(user, extra = {}) {
  const page = await browser.newPage({ viewport: { width: 720, height: 560 } });
  recordConsole(page, logs);
  await page.goto(`${site.url}?${new URLSearchParams({ user, ...extra })}`);
  await page.waitForFunction(() => window.chat?.status === "live", null, { timeout: TIMEOUT });
  return page;
}

async function say(page, text) {
  await page.fill("#text", text);
  await page.click("#send");
}

/** Waits until the page has received exactly `texts`, in order. */
async function expectMessages(page, texts) {
  try {
    await page.waitForFunction(
      (want) => JSON.stringify(window.chat.received.map((m) => m.text)) === JSON.stringify(want),
      texts,
      { timeout: TIMEOUT },
    );
  } catch (err) {
    const got = await page.evaluate(() => window.chat.received.map((m) => m.text));
    assert.fail(`${err.message}\nwanted ${JSON.stringify(texts)}\ngot    ${JSON.stringify(got)}\n${logs.join("\n")}`);
  }
}

test("two people chat live, a late joiner replays the room, every message once", async () => {
  const ada = await join("ada");
  const lin = await join("lin");

  await say(ada, "hello");
  await expectMessages(lin, ["hello"]);
  await say(lin, "hey ada");
  await expectMessages(ada, ["hello", "hey ada"]);

  // Another writer (a bot, over plain HTTP) posts a batch: a top-level array is one message per element.
  const bot = await fetch(`${node.url}/chat/room-7`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify([
      { user: "bot", text: "welcome, both", sent_at: new Date().toISOString() },
      { user: "bot", text: "remember to hydrate", sent_at: new Date().toISOString() },
    ]),
  });
  assert.equal(bot.status, 204);
  const all = ["hello", "hey ada", "welcome, both", "remember to hydrate"];
  await expectMessages(ada, all);
  await expectMessages(lin, all);

  // A late joiner replays the history with catch-up reads, then tails.
  const grace = await join("grace");
  await expectMessages(grace, all);
  await say(grace, "sorry I'm late");
  for (const page of [ada, lin, grace]) await expectMessages(page, [...all, "sorry I'm late"]);

  // The stream holds each message once, as NDJSON.
  const history = await fetch(`${node.url}/chat/room-7?offset=-1`);
  assert.equal(history.headers.get("content-type"), "application/x-ndjson");
  const stored = (await history.text()).trim().split("\n").map((line) => JSON.parse(line));
  assert.deepEqual(stored.map((m) => m.text), [...all, "sorry I'm late"]);
  assert.deepEqual(stored.map((m) => m.user), ["ada", "lin", "bot", "bot", "grace"]);

  for (const page of [ada, lin, grace]) {
    assert.deepEqual(await page.evaluate(() => window.chat.errors), []);
  }
  await screenshot(ada, "chat-room-ada");
  await screenshot(grace, "chat-room-grace");
});

test("the same page through a gateway that allows the page's origin", async () => {
  const gateway = await startGateway({ upstream: node.url, args: ["--cors-allowed-origin", site.origin] });
  const where = { ursula: gateway.url, room: "chat/room-gw" };
  const ada = await join("ada", where);
  const lin = await join("lin", where);
  await say(ada, "through the gateway");
  await expectMessages(lin, ["through the gateway"]);
  await say(lin, "CORS lets us read");
  await expectMessages(ada, ["through the gateway", "CORS lets us read"]);
  const stored = await fetch(`${gateway.url}/chat/room-gw?offset=-1`);
  assert.deepEqual((await stored.text()).trim().split("\n").map((l) => JSON.parse(l).text), ["through the gateway", "CORS lets us read"]);
  await screenshot(lin, "chat-room-via-gateway");
});
