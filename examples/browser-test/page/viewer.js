// A stream viewer for an access-controlled gateway on another origin:
// - a public tail with EventSource (it cannot send a token: public_read only);
// - a private tail with fetch and a ReadableStream, `Authorization: Bearer`,
//   that treats `event: credential-expired` as a signal to get a fresh token
//   and re-read from the last offset it saw (spec/05 "From a browser");
// - probes that report exactly what the browser let the page see.
// The tests drive it through `window.viewer`.

import { LineBuffer, sseEvents } from "/lib/sse.js";

const params = new URLSearchParams(location.search);
const gateway = (params.get("gateway") ?? "").replace(/\/$/, "");
const issuer = (params.get("issuer") ?? "").replace(/\/$/, "");
const $ = (id) => document.getElementById(id);
$("origin").textContent = location.origin;
$("gateway").textContent = gateway || "(none)";
$("issuer").textContent = issuer || "(none)";

function log(list, text, kind = "") {
  const li = document.createElement("li");
  li.textContent = text;
  if (kind) li.className = kind;
  $(list).append(li);
}

function status(id, text, kind = "") {
  $(id).textContent = text;
  $(id).className = `status ${kind}`;
}

/** An access token from the issuer's token endpoint (client credentials). */
async function fetchToken(subject, ttl) {
  const response = await fetch(`${issuer}/token`, {
    method: "POST",
    body: new URLSearchParams({ grant_type: "client_credentials", client_id: "stream-viewer", subject, ttl: String(ttl) }),
  });
  if (!response.ok) throw new Error(`token endpoint: ${response.status}`);
  return response.json();
}

// ---- public tail: EventSource ------------------------------------------------

const publicTail = { messages: [], controls: 0, errors: 0, opened: false };

/** Opens an EventSource on `path` (e.g. /bucket/stream?offset=now&live=sse); resolves on its first control event. */
function tailPublic(path) {
  const lines = new LineBuffer();
  const es = new EventSource(`${gateway}${path}`);
  publicTail.source = es;
  status("public-status", "connecting", "warn");
  return new Promise((resolve, reject) => {
    es.addEventListener("open", () => (publicTail.opened = true));
    es.addEventListener("data", (e) => {
      for (const line of lines.push(e.data)) {
        const message = JSON.parse(line);
        publicTail.messages.push(message);
        log("public-log", `data ${line}`, "ok");
      }
    });
    es.addEventListener("control", (e) => {
      publicTail.controls++;
      publicTail.offset = JSON.parse(e.data).streamNextOffset;
      status("public-status", `live at ${publicTail.offset}: ${publicTail.messages.length} message(s)`, "ok");
      resolve(publicTail.offset);
    });
    es.addEventListener("error", () => {
      publicTail.errors++;
      status("public-status", "error (EventSource)", "bad");
      log("public-log", `error, readyState ${es.readyState}`, "bad");
      es.close();
      reject(new Error("EventSource failed"));
    });
  });
}

// ---- private tail: fetch + Bearer, resumed on credential-expired ------------

const privateTail = {
  values: [], // every message, in order
  sessions: [], // { from, exp, values, ended, expiredData }
  offset: "-1",
  status: "idle",
  errors: [],
};

/**
 * Tails `path` (/bucket/stream) from offset -1 as `subject`. The first token
 * lives `firstTtl` seconds; after `credential-expired` (or any other end) a
 * fresh token is fetched and the read resumes from the last
 * `streamNextOffset`. With `holdResume`, it waits for `viewer.resume()`
 * before reconnecting after an expiry (so a test can append meanwhile).
 */
async function tailPrivate({ path, subject, firstTtl = 600, ttl = 600, holdResume = false }) {
  const controller = new AbortController();
  privateTail.stop = () => controller.abort();
  let nextTtl = firstTtl;
  try {
    while (!controller.signal.aborted) {
      const grant = await fetchToken(subject, nextTtl);
      nextTtl = ttl;
      const session = { from: privateTail.offset, exp: grant.exp, values: [], ended: null };
      privateTail.sessions.push(session);
      log("private-log", `session ${privateTail.sessions.length}: token exp ${grant.exp}, from offset ${session.from}`);
      const response = await fetch(`${gateway}${path}?offset=${encodeURIComponent(privateTail.offset)}&live=sse`, {
        headers: { Authorization: `Bearer ${grant.access_token}` },
        signal: controller.signal,
      });
      session.status = response.status;
      session.incarnation = response.headers.get("stream-incarnation");
      if (response.status !== 200) throw new Error(`read answered ${response.status}: ${await response.text()}`);
      privateTail.status = "live";
      status("private-status", `live (session ${privateTail.sessions.length})`, "ok");
      const lines = new LineBuffer();
      let pending = [];
      for await (const event of sseEvents(response)) {
        if (event.type === "data") {
          pending.push(...lines.push(event.data));
        } else if (event.type === "control") {
          // Data counts once its control event (and offset) arrived.
          for (const line of pending) {
            const value = JSON.parse(line);
            privateTail.values.push(value);
            session.values.push(value);
            log("private-log", `data ${line}`, "ok");
          }
          pending = [];
          privateTail.offset = JSON.parse(event.data).streamNextOffset ?? privateTail.offset;
        } else if (event.type === "credential-expired") {
          session.ended = "credential-expired";
          session.expiredData = event.data;
          log("private-log", `event: credential-expired ${event.data} at offset ${privateTail.offset}`, "warn");
          break;
        } else if (event.type === "error") {
          throw new Error(`error event: ${event.data}`);
        }
      }
      session.ended ??= "ended";
      privateTail.status = "reconnecting";
      status("private-status", `session ${privateTail.sessions.length} ${session.ended}: resuming`, "warn");
      if (holdResume && session.ended === "credential-expired") {
        privateTail.status = "held";
        await new Promise((resolve) => (privateTail.resume = resolve));
      }
    }
  } catch (err) {
    if (controller.signal.aborted) {
      privateTail.status = "stopped";
      status("private-status", `stopped after ${privateTail.values.length} message(s)`, "ok");
      return;
    }
    privateTail.status = "failed";
    privateTail.errors.push(String(err));
    status("private-status", `failed: ${err.message}`, "bad");
    log("private-log", String(err), "bad");
  }
}

// ---- probes -------------------------------------------------------------------

/** A fetch whose outcome is reported, not thrown: what did the browser let us see? */
async function probeFetch(label, path, { token, method = "GET" } = {}) {
  try {
    const response = await fetch(`${gateway}${path}`, {
      method,
      headers: token ? { Authorization: `Bearer ${token}` } : {},
    });
    const result = {
      ok: true,
      status: response.status,
      nextOffset: response.headers.get("stream-next-offset"),
      body: await response.text(),
    };
    log("probe-log", `${label}: ${result.status}, Stream-Next-Offset ${result.nextOffset}`, "ok");
    return result;
  } catch (err) {
    log("probe-log", `${label}: ${err.name}: ${err.message}`, "bad");
    return { ok: false, name: err.name, message: err.message };
  }
}

/** Opens an EventSource and reports whether it opened, got data, or errored. */
function probeEventSource(label, path, timeoutMs = 15000) {
  return new Promise((resolve) => {
    const es = new EventSource(`${gateway}${path}`);
    const outcome = { opened: false, data: 0, error: false };
    const finish = () => {
      outcome.readyState = es.readyState;
      es.close();
      log("probe-log", `${label}: ${JSON.stringify(outcome)}`, outcome.error ? "bad" : "ok");
      resolve(outcome);
    };
    es.addEventListener("open", () => (outcome.opened = true));
    es.addEventListener("data", () => outcome.data++);
    es.addEventListener("control", () => finish());
    es.addEventListener("error", () => {
      outcome.error = true;
      outcome.readyStateAtError = es.readyState;
      finish();
    });
    setTimeout(finish, timeoutMs);
  });
}

window.viewer = { gateway, issuer, fetchToken, tailPublic, publicTail, tailPrivate, privateTail, probeFetch, probeEventSource };
window.viewerReady = true;
