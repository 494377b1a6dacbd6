// The resumable AI stream example against processes this test starts: an
// ursula development node ($URSULA_BIN) and a gateway in front of it.

import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { startDevNode, startGateway, stopAll } from "../lib/processes.mjs";
import { ANSWER, ProducerFenced, createRun, fakeModel, gateIndex, pauseAt, produce, tokenize } from "./producer.mjs";
import { follow } from "./reader.mjs";

const TOKENS = tokenize(ANSWER);
let node;
let gateway;

before(async () => {
  node = await startDevNode();
  gateway = await startGateway({ upstream: node.url });
});
after(stopAll);

async function catchUp(url, run) {
  const response = await fetch(`${url}/${run}?offset=-1`);
  assert.equal(response.status, 200);
  return { text: await response.text(), closed: response.headers.get("stream-closed") };
}

/** An async iterable of `items` that pauses before index `at` until `gate` resolves. */
async function* pausing(items, at, gate) {
  for (let i = 0; i < items.length; i++) {
    if (i === at) await gate;
    yield items[i];
  }
}

for (const target of ["development node", "gateway"]) {
  describe(`through the ${target}`, () => {
    const url = () => (target === "gateway" ? gateway.url : node.url);

    test("a lost answer is deduplicated and a dropped reader resumes without loss or repeat", async () => {
      const run = `agent/run-dedup-${Date.now()}`;
      await createRun({ url: url(), run });
      const pieces = [];
      // The producer waits at the drop point until the reader is back, so
      // the drop lands mid-generation however the tokens are batched.
      let readerBack;
      const back = new Promise((resolve) => (readerBack = resolve));
      const [read, stats] = await Promise.all([
        follow({
          url: url(),
          run,
          dropAfter: 30,
          onText: (p) => pieces.push(p),
          onConnect: ({ connections }) => connections > 1 && readerBack(),
        }),
        produce({
          url: url(),
          run,
          chunks: pauseAt(fakeModel(TOKENS, 2), gateIndex(TOKENS, 30), back),
          loseAckOf: new Set([2, 7]),
        }),
      ]);
      assert.equal(stats.appended, TOKENS.length);
      assert.equal(stats.duplicates, 2, "two re-sent appends answered as repeats");
      assert.equal(read.connections, 2, "the reader reconnected once");
      assert.equal(read.text, ANSWER);
      assert.equal(pieces.join(""), ANSWER);
      const stored = await catchUp(url(), run);
      assert.equal(stored.text, ANSWER, "the stream holds every token once");
      assert.equal(stored.closed, "true");
    });

    test("a second device opened mid-generation replays the answer so far, then tails", async () => {
      const run = `agent/run-late-${Date.now()}`;
      await createRun({ url: url(), run });
      const half = Math.floor(TOKENS.length / 2);
      const firstHalf = TOKENS.slice(0, half).join("");
      let lateSawFirstHalf;
      const gate = new Promise((resolve) => (lateSawFirstHalf = resolve));
      const producing = produce({ url: url(), run, chunks: pausing(TOKENS, half, gate) });
      // Wait (by reading) until the first half is in the stream, then open the late reader.
      const early = follow({ url: url(), run });
      let lateText = "";
      const late = (async () => {
        for (;;) {
          const { text } = await catchUp(url(), run);
          if (text === firstHalf) break;
          await new Promise((r) => setTimeout(r, 20));
        }
        return follow({
          url: url(),
          run,
          onText: (piece) => {
            lateText += piece;
            if (lateText === firstHalf) lateSawFirstHalf();
          },
        });
      })();
      const [, first, second] = await Promise.all([producing, early, late]);
      assert.equal(first.text, ANSWER);
      assert.equal(second.text, ANSWER);
      assert.equal(second.connections, 1);
    });

    test("a restarted worker claims a new epoch and the old one is fenced", async () => {
      const run = `agent/run-epoch-${Date.now()}`;
      await createRun({ url: url(), run });
      const reading = follow({ url: url(), run });
      await produce({ url: url(), run, chunks: fakeModel(TOKENS.slice(0, 4)), epoch: 1, close: false });
      // The worker "crashed"; its successor bumps the epoch and starts at seq 0.
      await produce({ url: url(), run, chunks: fakeModel(TOKENS.slice(4, 9)), epoch: 2, close: false });
      // The old worker wakes up and tries its next token: refused, nothing written.
      const stale = fetch(`${url()}/${run}`, {
        method: "POST",
        headers: { "Content-Type": "text/plain", "Producer-Id": "worker-1", "Producer-Epoch": "1", "Producer-Seq": "4" },
        body: "STALE ",
      });
      assert.equal((await stale).status, 403);
      await assert.rejects(
        produce({ url: url(), run, chunks: fakeModel(["STALE "]), epoch: 1, close: false }),
        ProducerFenced,
      );
      await produce({ url: url(), run, chunks: fakeModel([]), epoch: 2 }); // close
      const read = await reading;
      assert.equal(read.text, TOKENS.slice(0, 9).join(""));
    });
  });
}

test("demo.mjs: the one documented command", async () => {
  const demo = fileURLToPath(new URL("./demo.mjs", import.meta.url));
  const { stdout } = await promisify(execFile)(process.execPath, [demo, "--url", node.url, "--delay-ms", "5"], {
    timeout: 60_000,
  });
  assert.match(stdout, /OK: the reader saw every token exactly once/);
  assert.match(stdout, /resuming from offset/);
});
