#!/usr/bin/env node
// Starts the Durable Streams reference server (@durable-streams/server 0.3.7,
// in-memory store) so the harness itself can be checked end to end.
// Its streams live at /v1/stream/NAME, so run the suite against it with
// `run.sh URL --no-rewrite`.
//
// Usage: node reference-server.mjs [PORT]   (default 4437; 0 = any free port)
// LONG_POLL_TIMEOUT_MS (default 1000, ursula's default, spec/42 §9.1): the
// package default is 30000, which makes the two "offset=now with long-poll"
// tests exceed vitest's 5 s test timeout.
// Prints "listening URL" once ready; stops on SIGINT/SIGTERM.

import { DurableStreamTestServer } from "@durable-streams/server"

const port = Number(process.argv[2] ?? process.env.PORT ?? 4437)
const longPollTimeout = Number(process.env.LONG_POLL_TIMEOUT_MS ?? 1000)
const server = new DurableStreamTestServer({ port, host: `127.0.0.1`, longPollTimeout })
await server.start()
console.log(`listening ${server.url}`)

const stop = async () => {
  await server.stop()
  process.exit(0)
}
process.on(`SIGINT`, stop)
process.on(`SIGTERM`, stop)
