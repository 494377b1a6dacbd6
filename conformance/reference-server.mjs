#!/usr/bin/env node
// Starts the Durable Streams reference server (@durable-streams/server 0.3.7,
// in-memory store) so the harness itself can be checked end to end.
// Its streams live at /v1/stream/NAME, so run the suite against it with
// `run.sh URL --no-rewrite`.
//
// Usage: node reference-server.mjs [PORT]   (default 4437; 0 = any free port)
// Prints "listening URL" once ready; stops on SIGINT/SIGTERM.

import { DurableStreamTestServer } from "@durable-streams/server"

const port = Number(process.argv[2] ?? process.env.PORT ?? 4437)
const server = new DurableStreamTestServer({ port, host: `127.0.0.1` })
await server.start()
console.log(`listening ${server.url}`)

const stop = async () => {
  await server.stop()
  process.exit(0)
}
process.on(`SIGINT`, stop)
process.on(`SIGTERM`, stop)
