// A Server-Sent Events parser for `fetch` response bodies, shared by the
// Node scripts and the pages (the static servers serve this file at
// /lib/sse.js). `EventSource` parses SSE itself but cannot send an
// `Authorization` header; reading the body of a `fetch` can.
//
// Ursula's live reads (`?offset=...&live=sse`) send `event: data` (the
// payload; text, NDJSON or base64 as the stream's content type implies),
// `event: control` (JSON with `streamNextOffset`, `streamCursor`,
// `upToDate`, `streamClosed`), `event: error`, and, through an
// access-controlled gateway, `event: credential-expired` as the last frame
// of a session whose token expired.

/** Splits SSE text into events, across chunk boundaries. */
export class SseParser {
  constructor() {
    this.buffer = "";
    this.skipLf = false; // the previous chunk ended with CR: a leading LF belongs to it
    this.reset();
  }

  reset() {
    this.type = "";
    this.data = [];
    this.id = undefined;
    this.hasData = false;
  }

  /** Feeds decoded text; returns the events completed by it. */
  push(text) {
    const events = [];
    let chunk = text;
    if (this.skipLf && chunk.startsWith("\n")) chunk = chunk.slice(1);
    this.skipLf = false;
    this.buffer += chunk;
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.buffer);
      if (!match) break;
      // A CR at the very end may be the first half of a CRLF still in flight.
      if (match[0] === "\r" && match.index === this.buffer.length - 1) {
        this.skipLf = true;
      }
      const line = this.buffer.slice(0, match.index);
      this.buffer = this.buffer.slice(match.index + match[0].length);
      const event = this.line(line);
      if (event) events.push(event);
    }
    return events;
  }

  line(line) {
    if (line === "") {
      if (!this.hasData && this.type === "") {
        this.reset();
        return null;
      }
      const event = { type: this.type || "message", data: this.data.join("\n"), id: this.id };
      this.reset();
      return event;
    }
    if (line.startsWith(":")) return null; // a comment
    const colon = line.indexOf(":");
    const field = colon === -1 ? line : line.slice(0, colon);
    let value = colon === -1 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "data") {
      this.data.push(value);
      this.hasData = true;
    } else if (field === "event") {
      this.type = value;
    } else if (field === "id") {
      this.id = value;
    }
    return null;
  }
}

/**
 * The events of an SSE response body, in order, until the server ends the
 * response (or `signal` aborts the fetch, which rejects the read).
 */
export async function* sseEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const parser = new SseParser();
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      for (const event of parser.push(value)) yield event;
    }
  } finally {
    reader.releaseLock();
  }
}

/**
 * Joins NDJSON text that arrives in pieces (SSE `data` events, catch-up
 * pages that may end mid-line) into whole lines.
 */
export class LineBuffer {
  constructor() {
    this.pending = "";
  }

  /** Adds text; returns the complete, non-empty lines. */
  push(text) {
    this.pending += text;
    const lines = this.pending.split("\n");
    this.pending = lines.pop() ?? "";
    return lines.filter((line) => line !== "");
  }
}
