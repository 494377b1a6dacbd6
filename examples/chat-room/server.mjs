#!/usr/bin/env node
// The chat room's static server (spec/10): serves the page and tells it
// where Ursula is. The page itself talks to Ursula directly: it creates the
// room's JSON stream, replays its history, posts messages and tails new
// ones with EventSource (`?offset=...&live=sse`).
//
//   node chat-room/server.mjs [--port 8080] [--ursula http://127.0.0.1:4437] [--room chat/room-7]
//
// then open http://127.0.0.1:8080/?user=ada (and ?user=lin in another tab).
// The page's origin differs from Ursula's: the development node answers
// every origin (`Access-Control-Allow-Origin: *`); a gateway needs
// `--cors-allowed-origin http://127.0.0.1:8080`.

import { parseArgs } from "node:util";
import { fileURLToPath, pathToFileURL } from "node:url";
import { startStaticServer } from "../lib/static-server.mjs";

const PUBLIC = fileURLToPath(new URL("./public/", import.meta.url));

export function startChatServer({ port = 8080, host = "127.0.0.1", ursula, room = "chat/room-7" }) {
  const config = JSON.stringify({ ursula: ursula.replace(/\/$/, ""), room });
  return startStaticServer({
    root: PUBLIC,
    host,
    port,
    routes: {
      "GET /config.json": (req, res) => {
        res.writeHead(200, { "content-type": "application/json", "cache-control": "no-store" });
        res.end(config);
      },
    },
  });
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  const { values } = parseArgs({
    options: {
      port: { type: "string", default: "8080" },
      host: { type: "string", default: "127.0.0.1" },
      ursula: { type: "string", default: process.env.URSULA_URL ?? "http://127.0.0.1:4437" },
      room: { type: "string", default: "chat/room-7" },
    },
  });
  const server = await startChatServer({ ...values, port: Number(values.port) });
  console.log(`chat room ${values.room} on ${values.ursula}`);
  console.log(`open ${server.url}?user=ada and ${server.url}?user=lin`);
}
