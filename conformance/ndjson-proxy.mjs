#!/usr/bin/env node
// Dev aid for checking exclusions-ndjson.txt: an HTTP proxy in front of the
// reference server that rewrites its JSON-stream reads from the upstream
// representation (an application/json array) to the one ursula uses
// (spec/41 §7.1, spec/42 §9.4):
//   - GET of an application/json stream: body `[a,b]` -> `a\nb\n`,
//     Content-Type: application/x-ndjson (`[]` -> empty body)
//   - live=sse of an application/json stream: each `event: data` payload
//     `[a,b]` -> `a\nb\n` (sent as data: lines), plus
//     Stream-Data-Content-Type: application/x-ndjson
// Everything else passes through. Run the suite through it in ndjson mode
// with --no-rewrite: tests that fail here but pass directly against the
// reference server are the ones that depend on the array representation.
//
// Usage: node ndjson-proxy.mjs UPSTREAM_URL [PORT]
//   e.g. node ndjson-proxy.mjs http://127.0.0.1:4437 4438

import { createServer, request } from "node:http"

const upstream = new URL(process.argv[2] ?? `http://127.0.0.1:4437`)
const port = Number(process.argv[3] ?? 4438)

const isJson = (ct) => (ct ?? ``).split(`;`)[0].trim().toLowerCase() === `application/json`
const toNdjson = (text) => {
  const trimmed = text.trim()
  if (trimmed === ``) return ``
  const arr = JSON.parse(trimmed)
  return arr.map((v) => `${JSON.stringify(v)}\n`).join(``)
}

function forward(req, body, headers = req.headers, method = req.method) {
  return new Promise((resolve, reject) => {
    const h = { ...headers, host: upstream.host }
    delete h[`accept-encoding`] // keep bodies uncompressed so we can rewrite them
    const up = request(
      { host: upstream.hostname, port: upstream.port, path: req.url, method, headers: h },
      resolve
    )
    up.on(`error`, reject)
    up.end(body)
  })
}

function readAll(stream) {
  return new Promise((resolve, reject) => {
    const chunks = []
    stream.on(`data`, (c) => chunks.push(c))
    stream.on(`end`, () => resolve(Buffer.concat(chunks)))
    stream.on(`error`, reject)
  })
}

async function streamContentType(req) {
  const res = await forward(req, undefined, { ...req.headers }, `HEAD`)
  res.resume()
  return res.headers[`content-type`]
}

function rewriteSseBlock(block) {
  const lines = block.split(`\n`)
  if (!lines.some((l) => l === `event: data` || l === `event:data`)) return block
  const data = lines
    .filter((l) => l.startsWith(`data:`))
    .map((l) => l.slice(5).replace(/^ /, ``))
    .join(`\n`)
  const nd = toNdjson(data)
  return [`event: data`, ...nd.split(`\n`).map((l) => `data:${l}`)].join(`\n`)
}

createServer(async (req, res) => {
  try {
    const body = req.method === `GET` || req.method === `HEAD` ? undefined : await readAll(req)
    const live = new URL(req.url, `http://x`).searchParams.get(`live`)
    const sseJson = req.method === `GET` && live === `sse` && isJson(await streamContentType(req))
    const up = await forward(req, body)
    const headers = { ...up.headers }

    if (sseJson && up.statusCode === 200) {
      delete headers[`content-length`]
      headers[`stream-data-content-type`] = `application/x-ndjson`
      res.writeHead(up.statusCode, headers)
      let buf = ``
      up.setEncoding(`utf8`)
      up.on(`data`, (chunk) => {
        buf += chunk.replace(/\r\n/g, `\n`)
        let i
        while ((i = buf.indexOf(`\n\n`)) >= 0) {
          const block = buf.slice(0, i)
          buf = buf.slice(i + 2)
          res.write(`${rewriteSseBlock(block)}\n\n`)
        }
      })
      up.on(`end`, () => res.end(buf))
      res.on(`close`, () => up.destroy())
      return
    }

    if (req.method === `GET` && isJson(headers[`content-type`]) && up.statusCode === 200) {
      const text = (await readAll(up)).toString(`utf8`)
      const out = Buffer.from(toNdjson(text))
      headers[`content-type`] = `application/x-ndjson`
      delete headers[`transfer-encoding`]
      headers[`content-length`] = String(out.length)
      res.writeHead(up.statusCode, headers)
      res.end(out)
      return
    }

    res.writeHead(up.statusCode, headers)
    up.pipe(res)
    res.on(`close`, () => up.destroy())
  } catch (err) {
    if (!res.headersSent) res.writeHead(502, { "content-type": `text/plain` })
    res.end(`proxy error: ${err.message}`)
  }
}).listen(port, `127.0.0.1`, () => {
  console.log(`listening http://127.0.0.1:${port} -> ${upstream.origin}`)
})
