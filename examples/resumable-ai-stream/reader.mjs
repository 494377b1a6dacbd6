#!/usr/bin/env node
// The reader of a resumable AI stream (spec/09): replays a run from the
// start (`offset=-1`), tails it live over SSE (`live=sse`), and after a
// disconnect resumes from the last offset it saw (the `streamNextOffset`
// of the last control event), so it neither loses nor repeats a token. It
// ends when the producer closed the stream (`streamClosed`).
//
//   node resumable-ai-stream/reader.mjs --run agent/run-42 [--url URL] [--drop-after 40]
//
// --drop-after N cuts the connection (once) when N characters of the
// answer have arrived, to show the resume. $URSULA_TOKEN, when set, is sent as a bearer token.

import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { sseEvents } from "../lib/sse.js";

/**
 * Follows `run` from `offset` until the stream is closed. `onText(text)`
 * gets each piece of the answer once, in order. Text of a data event is
 * committed together with the control event that follows it (the server
 * writes the two together), so a connection cut between them re-reads the
 * data instead of skipping or repeating it.
 *
 * `dropAfter` (a number of characters) aborts the connection once, when
 * that much of the answer has arrived, as a flaky network would. Returns
 * `{ text, offset, connections }`.
 */
export async function follow({
  url,
  run,
  offset = "-1",
  token,
  onText = () => {},
  onConnect = () => {},
  dropAfter,
  log = () => {},
  signal,
  maxFailures = 8,
}) {
  let text = "";
  let connections = 0;
  let dropped = false;
  let failures = 0; // connection attempts in a row that got no answer
  for (;;) {
    if (signal?.aborted) throw signal.reason;
    connections++;
    onConnect({ offset, connections });
    const controller = new AbortController();
    const abortOuter = () => controller.abort(signal.reason);
    signal?.addEventListener("abort", abortOuter, { once: true });
    let pending = null; // data waiting for its control event
    let closed = false;
    try {
      const response = await fetch(`${url}/${run}?offset=${encodeURIComponent(offset)}&live=sse`, {
        headers: token ? { Authorization: `Bearer ${token}` } : {},
        signal: controller.signal,
      });
      if (response.status !== 200) {
        const body = await response.text();
        throw Object.assign(new Error(`read ${run}: ${response.status} ${body}`), { fatal: response.status < 500 });
      }
      failures = 0;
      for await (const event of sseEvents(response)) {
        if (event.type === "data") {
          pending = (pending ?? "") + event.data;
        } else if (event.type === "control") {
          const control = JSON.parse(event.data);
          if (pending !== null) {
            text += pending;
            onText(pending);
            pending = null;
          }
          offset = control.streamNextOffset ?? offset;
          if (control.streamClosed) {
            closed = true;
            break;
          }
          if (dropAfter !== undefined && !dropped && text.length >= dropAfter) {
            dropped = true;
            log(`dropping the connection after ${text.length} characters (offset ${offset})`);
            controller.abort(new Error("simulated disconnect"));
          }
        } else if (event.type === "error") {
          throw Object.assign(new Error(`read ${run}: ${event.data}`), { fatal: true });
        } else if (event.type === "credential-expired") {
          log("credential expired; a real client refreshes its token here");
          break;
        }
      }
    } catch (err) {
      if (err.fatal || signal?.aborted) throw err;
      if (!controller.signal.aborted) {
        failures++;
        log(`connection lost (${err.cause?.code ?? err.message})`);
        if (failures >= maxFailures) throw err;
      }
    } finally {
      signal?.removeEventListener("abort", abortOuter);
      controller.abort(); // release the connection if it is still open
    }
    if (closed) return { text, offset, connections };
    log(`resuming from offset ${offset}`);
    await new Promise((r) => setTimeout(r, Math.min(5000, 100 * 2 ** failures)));
  }
}

async function main() {
  const { values } = parseArgs({
    options: {
      url: { type: "string", default: process.env.URSULA_URL ?? "http://127.0.0.1:4437" },
      run: { type: "string" },
      offset: { type: "string", default: "-1" },
      "drop-after": { type: "string" },
    },
  });
  if (!values.run) {
    console.error("usage: reader.mjs --run BUCKET/STREAM [--url URL] [--offset -1] [--drop-after N]");
    process.exit(2);
  }
  const result = await follow({
    url: values.url.replace(/\/$/, ""),
    run: values.run,
    offset: values.offset,
    token: process.env.URSULA_TOKEN,
    dropAfter: values["drop-after"] === undefined ? undefined : Number(values["drop-after"]),
    onText: (piece) => process.stdout.write(piece),
    log: (line) => console.error(`\n[reader] ${line}`),
  });
  process.stdout.write("\n");
  console.error(`[reader] stream closed at offset ${result.offset} after ${result.connections} connection(s)`);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    const cause = err.cause?.code ? ` (${err.cause.code}: is ursula running there?)` : "";
    console.error(`${err.message ?? err}${cause}`);
    process.exit(1);
  });
}
