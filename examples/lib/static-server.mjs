// A tiny static file server (node:http, no framework) for the example
// pages. It serves files under `root`, `/lib/sse.js` from this folder, and
// any extra `routes` ("METHOD /path" -> handler) an example adds.

import { createServer } from "node:http";
import { readFile } from "node:fs/promises";
import { extname, join, normalize, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

const LIB = fileURLToPath(new URL(".", import.meta.url));

const TYPES = {
  ".html": "text/html; charset=utf-8",
  ".js": "text/javascript; charset=utf-8",
  ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8",
  ".json": "application/json",
  ".svg": "image/svg+xml",
  ".ico": "image/x-icon",
};

/** The file under `root` that `urlPath` names, or null if it leaves `root`. */
function fileUnder(root, urlPath) {
  const relative = normalize(decodeURIComponent(urlPath)).replace(/^([/\\])+/, "");
  const full = resolve(root, relative);
  return full === resolve(root) || full.startsWith(resolve(root) + sep) ? full : null;
}

async function sendFile(res, path) {
  try {
    const body = await readFile(path);
    res.writeHead(200, {
      "content-type": TYPES[extname(path)] ?? "application/octet-stream",
      "cache-control": "no-store",
    });
    res.end(body);
  } catch {
    res.writeHead(404, { "content-type": "text/plain" });
    res.end("not found\n");
  }
}

/**
 * Starts the server; resolves to `{ url, port, origin, close }` once it listens.
 * `routes` maps "GET /config.json" style keys to `(req, res, url) => {}`.
 */
export function startStaticServer({ root, host = "127.0.0.1", port = 0, routes = {} }) {
  const server = createServer(async (req, res) => {
    const url = new URL(req.url, `http://${req.headers.host ?? host}`);
    try {
      const route = routes[`${req.method} ${url.pathname}`];
      if (route) return await route(req, res, url);
      if (req.method !== "GET" && req.method !== "HEAD") {
        res.writeHead(405, { allow: "GET, HEAD" });
        return res.end();
      }
      if (url.pathname === "/lib/sse.js") return await sendFile(res, join(LIB, "sse.js"));
      const path = url.pathname.endsWith("/") ? `${url.pathname}index.html` : url.pathname;
      const file = fileUnder(root, path);
      if (!file) {
        res.writeHead(404);
        return res.end();
      }
      return await sendFile(res, file);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`${err}\n`);
    }
  });
  return new Promise((resolvePromise, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const { port: actual } = server.address();
      const origin = `http://${host}:${actual}`;
      resolvePromise({
        server,
        port: actual,
        origin,
        url: `${origin}/`,
        close: () =>
          new Promise((done) => {
            server.closeAllConnections?.();
            server.close(() => done());
          }),
      });
    });
  });
}

/** Reads a request body as a Buffer. */
export function readBody(req) {
  return new Promise((resolveBody, reject) => {
    const parts = [];
    req.on("data", (part) => parts.push(part));
    req.on("end", () => resolveBody(Buffer.concat(parts)));
    req.on("error", reject);
  });
}
