// The chat room page (spec/10): one JSON stream per room. Messages are
// appended with fetch (as an idempotent producer, so a retried send is not
// posted twice), history is replayed with catch-up reads, and new messages
// are tailed with a native EventSource on `?offset=<offset>&live=sse`.

import { LineBuffer } from "/lib/sse.js";

const params = new URLSearchParams(location.search);
const config = await (await fetch("/config.json")).json();
const base = (params.get("ursula") ?? config.ursula).replace(/\/$/, "");
const room = params.get("room") ?? config.room;
const roomUrl = `${base}/${room}`;

const $ = (id) => document.getElementById(id);
const state = { status: "connecting", offset: null, received: [], sent: 0, errors: [] };
window.chat = state; // for tests and the curious

$("room").textContent = room;
$("where").textContent = roomUrl;
$("user").value = params.get("user") ?? `guest-${Math.random().toString(36).slice(2, 6)}`;

function setStatus(status, detail = "") {
  state.status = status;
  $("status").textContent = detail ? `${status}: ${detail}` : status;
  $("status").className = `status ${status}`;
}

function setOffset(offset) {
  state.offset = offset;
  $("offset").textContent = offset;
}

function render(message) {
  state.received.push(message);
  const li = document.createElement("li");
  if (message.user === $("user").value) li.className = "mine";
  const who = document.createElement("span");
  who.className = "who";
  who.textContent = message.user ?? "?";
  const time = document.createElement("time");
  time.textContent = message.sent_at ? new Date(message.sent_at).toLocaleTimeString() : "";
  li.append(who, document.createTextNode(message.text ?? ""), time);
  $("messages").append(li);
  li.scrollIntoView({ block: "end" });
}

// Create the room (idempotent: an existing room with the same content type answers 200).
async function ensureRoom() {
  const response = await fetch(roomUrl, { method: "PUT", headers: { "Content-Type": "application/json" } });
  if (response.status !== 201 && response.status !== 200) {
    throw new Error(`creating the room: ${response.status} ${await response.text()}`);
  }
}

// Replay history: catch-up reads from -1 until `Stream-Up-To-Date: true`.
// A page can end mid-line, so whole lines only are parsed.
async function replay() {
  let offset = "-1";
  const lines = new LineBuffer();
  for (;;) {
    const response = await fetch(`${roomUrl}?offset=${encodeURIComponent(offset)}`);
    if (response.status !== 200) throw new Error(`reading history: ${response.status} ${await response.text()}`);
    for (const line of lines.push(await response.text())) render(JSON.parse(line));
    const next = response.headers.get("stream-next-offset");
    if (next === null) throw new Error("Stream-Next-Offset is not exposed to this origin (CORS)");
    offset = next;
    if (response.headers.get("stream-up-to-date") === "true") return offset;
  }
}

// Tail live from `offset`. EventSource would reconnect by itself, but to
// the URL it was opened with (a stale offset): on an error we close it and
// open a new one from the last control event's `streamNextOffset` instead.
function tail(offset) {
  setOffset(offset);
  const lines = new LineBuffer();
  const es = new EventSource(`${roomUrl}?offset=${encodeURIComponent(offset)}&live=sse`);
  es.addEventListener("data", (e) => {
    // A data event may hold several messages, and SSE lines are not message boundaries.
    for (const line of lines.push(e.data)) render(JSON.parse(line));
  });
  es.addEventListener("control", (e) => {
    const control = JSON.parse(e.data);
    if (control.streamNextOffset) setOffset(control.streamNextOffset);
    setStatus("live");
  });
  es.addEventListener("open", () => setStatus("live"));
  es.addEventListener("error", () => {
    es.close();
    setStatus("reconnecting");
    setTimeout(() => tail(state.offset), 1000);
  });
}

// Sending: one producer per tab (Producer-Id kept for the tab's life, a new
// epoch per page load), sends one at a time so the sequence stays in order;
// a send whose answer was lost is repeated unchanged and deduplicated.
const producerId = sessionStorage.getItem("producer-id") ?? `tab-${crypto.randomUUID()}`;
sessionStorage.setItem("producer-id", producerId);
const producerEpoch = String(Date.now());
let producerSeq = 0;
let sending = Promise.resolve();

function send(message) {
  const seq = producerSeq++;
  const body = JSON.stringify(message);
  sending = sending.then(async () => {
    for (let attempt = 1; ; attempt++) {
      try {
        const response = await fetch(roomUrl, {
          method: "POST",
          headers: {
            "Content-Type": "application/json",
            "Producer-Id": producerId,
            "Producer-Epoch": producerEpoch,
            "Producer-Seq": String(seq),
          },
          body,
        });
        if (response.status === 200 || response.status === 204) {
          state.sent++;
          return;
        }
        throw Object.assign(new Error(`${response.status} ${await response.text()}`), { final: response.status < 500 });
      } catch (err) {
        if (err.final || attempt >= 5) {
          state.errors.push(String(err));
          setStatus("error", `send failed: ${err.message}`);
          return;
        }
        await new Promise((r) => setTimeout(r, 200 * attempt));
      }
    }
  });
  return sending;
}

$("composer").addEventListener("submit", (e) => {
  e.preventDefault();
  const text = $("text").value.trim();
  if (!text) return;
  $("text").value = "";
  send({ user: $("user").value, text, sent_at: new Date().toISOString() });
});

try {
  await ensureRoom();
  tail(await replay());
} catch (err) {
  state.errors.push(String(err));
  setStatus("error", err.message);
}
