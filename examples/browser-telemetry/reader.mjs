#!/usr/bin/env node
// Reads browser telemetry back (spec/11): replays the JSON stream by offset
// with catch-up reads (NDJSON pages, buffered across page ends, until
// `Stream-Up-To-Date: true`), then, with --follow, tails it live over SSE.
// Time windows are filtered here, on the browser's `captured_at`: the
// stream's own order is commit order, and offsets its only coordinates.
//
//   node browser-telemetry/reader.mjs [--url URL] [--stream telemetry/events]
//        [--from OFFSET] [--follow] [--type click] [--since ISO] [--until ISO]
//
// Prints one event per line (JSON) on stdout; the offset to resume from
// goes to stderr. $URSULA_TOKEN, when set, is sent as a bearer token.

import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";
import { LineBuffer, sseEvents } from "../lib/sse.js";

function auth(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** Catch-up: every event from `offset` to the current tail. Returns `{ events, offset }`. */
export async function readAll({ url, stream, offset = "-1", token, maxBytes }) {
  const events = [];
  const lines = new LineBuffer();
  for (;;) {
    const query = new URLSearchParams({ offset });
    if (maxBytes) query.set("max_bytes", String(maxBytes));
    const response = await fetch(`${url}/${stream}?${query}`, { headers: auth(token) });
    if (response.status !== 200) throw new Error(`reading ${stream}: ${response.status} ${await response.text()}`);
    for (const line of lines.push(await response.text())) events.push(JSON.parse(line));
    offset = response.headers.get("stream-next-offset");
    if (response.headers.get("stream-up-to-date") === "true") {
      if (lines.pending !== "") throw new Error("the stream's tail ends inside a message");
      return { events, offset };
    }
  }
}

/**
 * Live: calls `onEvent(event, offset)` for each event from `offset` on,
 * reconnecting from the last control event's `streamNextOffset` whenever a
 * session ends, until `signal` aborts.
 */
export async function followEvents({ url, stream, offset = "now", token, onEvent, onLive = () => {}, signal }) {
  let failures = 0;
  while (!signal?.aborted) {
    const lines = new LineBuffer();
    try {
      const response = await fetch(`${url}/${stream}?offset=${encodeURIComponent(offset)}&live=sse`, {
        headers: auth(token),
        signal,
      });
      if (response.status !== 200) throw new Error(`tailing ${stream}: ${response.status} ${await response.text()}`);
      failures = 0;
      let pending = [];
      for await (const event of sseEvents(response)) {
        if (event.type === "data") {
          pending.push(...lines.push(event.data));
        } else if (event.type === "control") {
          const control = JSON.parse(event.data);
          offset = control.streamNextOffset ?? offset;
          for (const line of pending) onEvent(JSON.parse(line), offset);
          pending = [];
          onLive(offset);
          if (control.streamClosed) return offset;
        } else if (event.type === "error") {
          throw new Error(`tailing ${stream}: ${event.data}`);
        }
      }
    } catch (err) {
      if (signal?.aborted) break;
      if (!String(err.message).startsWith("tailing")) {
        failures++; // the connection dropped or was refused: resume, backing off
        await new Promise((r) => setTimeout(r, Math.min(10_000, 250 * 2 ** failures)));
        continue;
      }
      throw err;
    }
  }
  return offset;
}

/** The filter of the command line: type, and a window on `captured_at`. */
export function matches(event, { type, since, until }) {
  if (type && event.type !== type) return false;
  const at = Date.parse(event.captured_at);
  if (since && !(at >= Date.parse(since))) return false;
  if (until && !(at < Date.parse(until))) return false;
  return true;
}

async function main() {
  const { values } = parseArgs({
    options: {
      url: { type: "string", default: process.env.URSULA_URL ?? "http://127.0.0.1:4437" },
      stream: { type: "string", default: "telemetry/events" },
      from: { type: "string", default: "-1" },
      follow: { type: "boolean", default: false },
      type: { type: "string" },
      since: { type: "string" },
      until: { type: "string" },
    },
  });
  const url = values.url.replace(/\/$/, "");
  const token = process.env.URSULA_TOKEN;
  const print = (event) => {
    if (matches(event, values)) process.stdout.write(`${JSON.stringify(event)}\n`);
  };
  const { events, offset } = await readAll({ url, stream: values.stream, offset: values.from, token });
  events.forEach(print);
  console.error(`read ${events.length} event(s); resume with --from ${offset}`);
  if (!values.follow) return;
  const controller = new AbortController();
  process.once("SIGINT", () => controller.abort());
  process.once("SIGTERM", () => controller.abort());
  let announced = false;
  const last = await followEvents({
    url,
    stream: values.stream,
    offset,
    token,
    signal: controller.signal,
    onEvent: print,
    onLive: () => {
      if (!announced) console.error("following live (Ctrl-C to stop)");
      announced = true;
    },
  });
  console.error(`stopped; resume with --from ${last}`);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    const cause = err.cause?.code ? ` (${err.cause.code}: is ursula running there?)` : "";
    console.error(`${err.message ?? err}${cause}`);
    process.exit(1);
  });
}
