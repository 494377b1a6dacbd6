#!/usr/bin/env node
// A redirect-following HTTP proxy for running the conformance suite against
// one node of a cluster. Node's fetch cannot resend a request body on a
// `307`, so this proxy buffers each request body, forwards the request to
// the node, and on a `307` sends it again (same method, headers and body) to
// the `Location`, up to 5 hops, as curl and most HTTP clients do. Every
// other answer, SSE included, is streamed back unchanged.
//
// Usage: node redirect-proxy.mjs UPSTREAM_URL [PORT]   (PORT 0: any free port)
// Prints `redirect proxy listening on http://ADDR` once it listens.

import { createServer, request } from "node:http"

const upstream = new URL(process.argv[2] ?? `http://127.0.0.1:4437`)
const port = Number(process.argv[3] ?? 0)
const MAX_HOPS = 5

function forward(target, req, body, res, hops) {
  const headers = { ...req.headers, host: target.host }
  // Once a hop answered 307 its request is done with: a node may answer a
  // large body's redirect before reading it and close the connection, and
  // the write error that follows belongs to no one.
  let redirected = false
  const out = request(
    { hostname: target.hostname, port: target.port, path: target.pathname + target.search, method: req.method, headers },
    (answer) => {
      const location = answer.headers.location
      if (answer.statusCode === 307 && location && hops < MAX_HOPS) {
        redirected = true
        answer.resume()
        forward(new URL(location, target), req, body, res, hops + 1)
        return
      }
      res.writeHead(answer.statusCode ?? 502, answer.headers)
      answer.pipe(res)
    },
  )
  out.on(`error`, (e) => {
    if (redirected) return
    if (!res.headersSent) res.writeHead(502, { "content-type": `text/plain` })
    res.end(String(e))
  })
  res.on(`close`, () => {
    if (!redirected) out.destroy()
  })
  out.end(body)
}

const server = createServer((req, res) => {
  // A client that went away must not take the proxy down.
  req.on(`error`, () => {})
  res.on(`error`, () => {})
  const chunks = []
  req.on(`data`, (c) => chunks.push(c))
  req.on(`end`, () => forward(new URL(req.url, upstream), req, Buffer.concat(chunks), res, 0))
})
server.listen(port, `127.0.0.1`, () => {
  console.log(`redirect proxy listening on http://127.0.0.1:${server.address().port}`)
})
