#!/usr/bin/env node
// One command for the whole resumable AI stream (spec/09), against a
// running development node or gateway:
//
//   node resumable-ai-stream/demo.mjs [--url http://127.0.0.1:4437]
//
// It creates a run (`agent/run-<time>`, text/plain, Stream-TTL 86400),
// starts a producer that appends the tokens of a fake generation as an
// idempotent producer (one answer "lost" and re-sent, deduplicated by the
// server), and a reader that tails the run over SSE, drops its connection
// mid-generation and resumes from its last offset. At the end it checks
// that the reader's text, and a fresh catch-up read, are exactly the answer.

import { parseArgs } from "node:util";
import { ANSWER, createRun, fakeModel, gateIndex, pauseAt, produce, tokenize } from "./producer.mjs";
import { follow } from "./reader.mjs";

const { values } = parseArgs({
  options: {
    url: { type: "string", default: process.env.URSULA_URL ?? "http://127.0.0.1:4437" },
    run: { type: "string", default: `agent/run-${Date.now()}` },
    "delay-ms": { type: "string", default: "40" },
    "drop-after": { type: "string", default: "45" },
  },
});
const url = values.url.replace(/\/$/, "");
const run = values.run;
const token = process.env.URSULA_TOKEN;
const tokens = tokenize(ANSWER);

try {
  await createRun({ url, run, token });
} catch (err) {
  console.error(`${err.message}\nIs ursula running at ${url}? Start the development node with: ursula`);
  process.exit(1);
}
console.error(`run: ${url}/${run}  (watch it too: curl -N '${url}/${run}?offset=-1&live=sse')\n`);

// The producer waits, once, at the token where the reader will drop its
// connection, until the reader is back: the drop lands mid-generation
// however the tokens are batched.
const dropAfter = Number(values["drop-after"]);
const gateAt = gateIndex(tokens, dropAfter);
let readerBack;
const back = new Promise((resolve) => (readerBack = resolve));

const reading = follow({
  url,
  run,
  token,
  dropAfter,
  onConnect: ({ connections }) => connections > 1 && readerBack(),
  onText: (piece) => process.stdout.write(piece),
  log: (line) => process.stdout.write(process.stdout.isTTY ? `\x1b[2m⟨reader: ${line}⟩\x1b[0m` : `⟨reader: ${line}⟩`),
});
const producing = produce({
  url,
  run,
  token,
  chunks: pauseAt(fakeModel(tokens, Number(values["delay-ms"])), gateAt, back),
  loseAckOf: new Set([3]),
});

const [read, stats] = await Promise.all([reading, producing]);
process.stdout.write("\n\n");
const replay = await fetch(`${url}/${run}?offset=-1`, { headers: token ? { Authorization: `Bearer ${token}` } : {} });
const stored = await replay.text();
console.log(`producer: ${stats.appended} tokens appended, ${stats.duplicates} duplicate(s) deduplicated`);
console.log(`reader: ${read.connections} connection(s), ended at offset ${read.offset}`);
const ok = read.text === ANSWER && stored === ANSWER;
console.log(ok ? "OK: the reader saw every token exactly once" : "MISMATCH between the answer, the reader and the stream");
process.exit(ok ? 0 : 1);
