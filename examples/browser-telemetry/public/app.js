// The demo page: a collector with the standard instrumentation, three
// buttons that make events, and a view of what was sent.

import { createCollector, instrument } from "./collector.js";

const $ = (id) => document.getElementById(id);

function show(stats) {
  $("queued").textContent = stats.queued;
  $("flushed").textContent = stats.flushed;
  $("failed").textContent = stats.failed;
  $("offset").textContent = stats.lastOffset ?? "-";
}

const collector = createCollector({
  flushMs: 2000,
  onFlush: (batch, stats) => {
    for (const event of batch) {
      const row = document.createElement("tr");
      const { captured_at, type, event_id, session, page, ...details } = event;
      for (const text of [captured_at, type, JSON.stringify(details)]) {
        const cell = document.createElement("td");
        cell.textContent = text;
        row.append(cell);
      }
      $("sent").prepend(row);
    }
    show(stats);
  },
});
instrument(collector);
window.telemetry = collector; // for tests and the console

$("load-missing").addEventListener("click", () => fetch("/no-such-resource.json"));
$("throw").addEventListener("click", () => {
  setTimeout(() => {
    throw new Error("demo failure");
  });
});
$("flush").addEventListener("click", () => collector.flush());
setInterval(() => show(collector.stats), 500);
