#!/usr/bin/env node
// The browser telemetry example's server (spec/11): serves the page and a
// same-origin route, POST /telemetry/events, that forwards the page's
// batches (JSON arrays) to the Ursula stream. The page needs no CORS and
// holds no credential; the server creates the stream at start.
//
//   node browser-telemetry/server.mjs [--port 8081] [--ursula http://127.0.0.1:4437] [--stream telemetry/events]
//
// then open http://127.0.0.1:8081/ and read the events with
// `node browser-telemetry/reader.mjs` (add --follow to tail them).
// $URSULA_TOKEN, when set, is sent upstream as a bearer token (a gateway
// with access control, where this server is the stream's owner).

import { parseArgs } from "node:util";
import { fileURLToPath, pathToFileURL } from "node:url";
import { readBody, startStaticServer } from "../lib/static-server.mjs";

const PUBLIC = fileURLToPath(new URL("./public/", import.meta.url));
const MAX_BATCH_BYTES = 1 << 20;

function auth(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

/** Creates the JSON stream (idempotent: an existing one answers 200). */
export async function createEventStream({ ursula, stream, token }) {
  const response = await fetch(`${ursula}/${stream}`, {
    method: "PUT",
    headers: { "Content-Type": "application/json", ...auth(token) },
  });
  if (response.status !== 201 && response.status !== 200) {
    throw new Error(`creating ${stream}: ${response.status} ${await response.text()}`);
  }
}

export async function startTelemetryServer({
  port = 8081,
  host = "127.0.0.1",
  ursula,
  stream = "telemetry/events",
  token = process.env.URSULA_TOKEN,
}) {
  const upstream = `${ursula.replace(/\/$/, "")}/${stream}`;
  await createEventStream({ ursula: ursula.replace(/\/$/, ""), stream, token });
  return startStaticServer({
    root: PUBLIC,
    host,
    port,
    routes: {
      // The collector's endpoint: one append per batch, its tail in Stream-Next-Offset.
      "POST /telemetry/events": async (req, res) => {
        if (!/^application\/json\b/i.test(req.headers["content-type"] ?? "")) {
          res.writeHead(415, { "content-type": "text/plain" });
          return res.end("send application/json\n");
        }
        const body = await readBody(req);
        if (body.length > MAX_BATCH_BYTES) {
          res.writeHead(413, { "content-type": "text/plain" });
          return res.end("batch too large\n");
        }
        let answer;
        try {
          answer = await fetch(upstream, {
            method: "POST",
            headers: { "Content-Type": "application/json", ...auth(token) },
            body,
          });
        } catch (err) {
          res.writeHead(502, { "content-type": "text/plain" });
          return res.end(`ursula unreachable: ${err.cause?.code ?? err.message}\n`);
        }
        const headers = { "cache-control": "no-store" };
        for (const name of ["stream-next-offset", "content-type", "retry-after"]) {
          const value = answer.headers.get(name);
          if (value !== null) headers[name] = value;
        }
        res.writeHead(answer.status, headers);
        res.end(Buffer.from(await answer.arrayBuffer()));
      },
    },
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: "8081" },
      host: { type: "string", default: "127.0.0.1" },
      ursula: { type: "string", default: process.env.URSULA_URL ?? "http://127.0.0.1:4437" },
      stream: { type: "string", default: "telemetry/events" },
    },
  });
  try {
    const server = await startTelemetryServer({ ...values, port: Number(values.port) });
    console.log(`telemetry into ${values.ursula}/${values.stream}`);
    console.log(`open ${server.url}; read with: node browser-telemetry/reader.mjs --follow`);
  } catch (err) {
    console.error(`${err.message ?? err}\nIs ursula running at ${values.ursula}? Start the development node with: ursula`);
    process.exit(1);
  }
}
