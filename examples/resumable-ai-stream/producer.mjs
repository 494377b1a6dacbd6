#!/usr/bin/env node
// The producer of a resumable AI stream (spec/09): the worker that talks to
// the model appends each token of a generation to one text stream per run,
// as an idempotent producer (Producer-Id, Producer-Epoch, Producer-Seq), so
// a token re-sent after a network error is deduplicated by the server, not
// written twice. At the end it closes the stream: readers see the end.
//
//   node resumable-ai-stream/producer.mjs [--url URL] [--run agent/run-42] [--delay-ms 60]
//
// URL defaults to $URSULA_URL or http://127.0.0.1:4437 (the development
// node or a gateway). $URSULA_TOKEN, when set, is sent as a bearer token
// (an access-controlled gateway).

import { parseArgs } from "node:util";
import { pathToFileURL } from "node:url";

/** A stand-in for a model: an answer, streamed a word (token) at a time. */
export const ANSWER =
  "Durable streams turn a model's output into a log. The worker appends each token; " +
  "every reader replays from an offset and then tails live. A reader that drops its " +
  "connection resumes from the last offset it saw, so no token is lost and none is " +
  "shown twice.\nThat is the whole trick.";

/** Splits text into word tokens that keep their spacing (concatenation gives the text back). */
export function tokenize(text) {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

/** A fake model: yields `tokens` one at a time, `delayMs` apart. */
export async function* fakeModel(tokens, delayMs = 0) {
  for (const token of tokens) {
    if (delayMs > 0) await new Promise((r) => setTimeout(r, delayMs));
    yield token;
  }
}

/** Yields `chunks`, waiting for `gate` (a promise) before the one at index `at`. */
export async function* pauseAt(chunks, at, gate) {
  let i = 0;
  for await (const chunk of chunks) {
    if (i++ === at) await gate;
    yield chunk;
  }
}

/** The index of the first token after which at least `chars` characters were produced. */
export function gateIndex(tokens, chars) {
  let total = 0;
  for (let i = 0; i < tokens.length; i++) {
    total += tokens[i].length;
    if (total >= chars) return i + 1;
  }
  return tokens.length;
}

/** The server says this producer was replaced by a newer epoch: stop writing. */
export class ProducerFenced extends Error {}

function authHeaders(token) {
  return token ? { Authorization: `Bearer ${token}` } : {};
}

async function describe(response) {
  const body = await response.text().catch(() => "");
  return `${response.status} ${response.statusText} ${body}`.trim();
}

/** Creates the run's text stream (idempotent: an existing one with the same settings answers 200). */
export async function createRun({ url, run, ttlSeconds = 86400, token }) {
  const response = await fetch(`${url}/${run}`, {
    method: "PUT",
    headers: { "Content-Type": "text/plain", "Stream-TTL": String(ttlSeconds), ...authHeaders(token) },
  });
  if (response.status !== 201 && response.status !== 200) {
    throw new Error(`creating ${run}: ${await describe(response)}`);
  }
  return response.headers.get("stream-next-offset");
}

/**
 * Appends every chunk of `chunks` (an async iterable of strings) to `run`,
 * then closes the stream. Each append carries the producer headers and is
 * retried unchanged after a network error or a 5xx: the server answers a
 * repeat with 204 and the original receipt. Returns counts of what happened.
 *
 * `loseAckOf` (a set of seqs) makes the producer act as if the answer to
 * those appends was lost and send them once more: a test of deduplication.
 */
export async function produce({
  url,
  run,
  chunks,
  producerId = "worker-1",
  epoch = 1,
  token,
  close = true,
  loseAckOf = new Set(),
  maxAttempts = 8,
  log = () => {},
}) {
  const stats = { appended: 0, duplicates: 0, retries: 0, nextOffset: null };
  let seq = 0;

  async function send(body, headers) {
    for (let attempt = 1; ; attempt++) {
      let response;
      try {
        response = await fetch(`${url}/${run}`, { method: "POST", headers, body });
      } catch (err) {
        if (attempt >= maxAttempts) throw err;
        stats.retries++;
        log(`append failed (${err.cause?.code ?? err.message}); sending it again`);
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** attempt)));
        continue;
      }
      if (response.status >= 500 && attempt < maxAttempts) {
        stats.retries++;
        const wait = Number(response.headers.get("retry-after") ?? 0) * 1000 || 100 * 2 ** attempt;
        log(`append answered ${response.status}; sending it again`);
        await response.body?.cancel();
        await new Promise((r) => setTimeout(r, Math.min(5000, wait)));
        continue;
      }
      return response;
    }
  }

  for await (const chunk of chunks) {
    const headers = {
      "Content-Type": "text/plain",
      "Producer-Id": producerId,
      "Producer-Epoch": String(epoch),
      "Producer-Seq": String(seq),
      ...authHeaders(token),
    };
    const sends = loseAckOf.has(seq) ? 2 : 1;
    for (let i = 0; i < sends; i++) {
      if (i > 0) log(`pretending the answer to seq ${seq} was lost: sending it again`);
      const response = await send(chunk, headers);
      if (response.status === 200) {
        stats.appended++;
      } else if (response.status === 204) {
        // A repeat: the server applied it once already.
        stats.duplicates++;
      } else if (response.status === 403) {
        throw new ProducerFenced(`producer ${producerId} epoch ${epoch} was replaced: ${await describe(response)}`);
      } else {
        throw new Error(`append seq ${seq}: ${await describe(response)}`);
      }
      stats.nextOffset = response.headers.get("stream-next-offset") ?? stats.nextOffset;
      await response.body?.cancel();
    }
    seq++;
  }

  if (close) {
    // Seal the stream: readers get the end (`streamClosed`), appends answer 409.
    const response = await send(undefined, { "Stream-Closed": "true", ...authHeaders(token) });
    if (response.status !== 204 && response.status !== 200) {
      throw new Error(`closing ${run}: ${await describe(response)}`);
    }
    stats.nextOffset = response.headers.get("stream-next-offset") ?? stats.nextOffset;
  }
  return stats;
}

async function main() {
  const { values } = parseArgs({
    options: {
      url: { type: "string", default: process.env.URSULA_URL ?? "http://127.0.0.1:4437" },
      run: { type: "string", default: `agent/run-${Date.now()}` },
      "producer-id": { type: "string", default: "worker-1" },
      epoch: { type: "string", default: "1" },
      "delay-ms": { type: "string", default: "60" },
    },
  });
  const url = values.url.replace(/\/$/, "");
  const token = process.env.URSULA_TOKEN;
  await createRun({ url, run: values.run, token });
  console.error(`producing into ${url}/${values.run}`);
  const stats = await produce({
    url,
    run: values.run,
    token,
    producerId: values["producer-id"],
    epoch: Number(values.epoch),
    chunks: fakeModel(tokenize(ANSWER), Number(values["delay-ms"])),
    log: (line) => console.error(line),
  });
  console.error(`done: ${JSON.stringify(stats)}`);
}

if (import.meta.url === pathToFileURL(process.argv[1]).href) {
  main().catch((err) => {
    const cause = err.cause?.code ? ` (${err.cause.code}: is ursula running there?)` : "";
    console.error(`${err.message ?? err}${cause}`);
    process.exit(1);
  });
}
