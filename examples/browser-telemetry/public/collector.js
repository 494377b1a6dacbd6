// A small browser telemetry collector (spec/11): events are queued with the
// time the browser captured them, and sent in batches, as one JSON array per
// request, to a same-origin endpoint that appends them to an Ursula JSON
// stream (one message per element). Batches go when the queue is full,
// every `flushMs`, and when the page is hidden or left (with `keepalive`,
// so the request outlives the page).
//
// Delivery is at least once: a batch whose answer was lost is sent again,
// so every event carries an `event_id` a consumer can deduplicate on.

const KEEPALIVE_LIMIT = 60_000; // bytes: browsers cap keepalive bodies at 64 KiB in flight

export function createCollector({ endpoint = "/telemetry/events", maxBatch = 20, flushMs = 2000, onFlush } = {}) {
  const session = crypto.randomUUID();
  const queue = [];
  const stats = { queued: 0, flushed: 0, failed: 0, lastOffset: null, byType: {} };
  let inFlight = Promise.resolve();

  function record(type, fields = {}) {
    queue.push({
      captured_at: new Date().toISOString(),
      type,
      event_id: crypto.randomUUID(),
      session,
      page: location.pathname,
      ...fields,
    });
    stats.queued++;
    stats.byType[type] = (stats.byType[type] ?? 0) + 1;
    if (queue.length >= maxBatch) flush();
  }

  async function post(batch, keepalive) {
    const response = await fetch(endpoint, {
      method: "POST",
      headers: { "Content-Type": "application/json" },
      body: JSON.stringify(batch),
      keepalive,
    });
    if (response.status !== 204 && response.status !== 200) {
      throw new Error(`${response.status} ${await response.text()}`);
    }
    stats.flushed += batch.length;
    stats.lastOffset = response.headers.get("Stream-Next-Offset");
    onFlush?.(batch, stats);
  }

  /**
   * Sends what is queued; batches go one at a time, in order. With
   * `keepalive` (the page is going away) every batch is sent at once: a
   * chained request might never start once the page is gone.
   */
  function flush({ keepalive = false } = {}) {
    if (keepalive) {
      while (queue.length > 0) {
        const batch = queue.splice(0, maxBatch);
        // Keep each keepalive body under the browser's limit.
        while (batch.length > 1 && JSON.stringify(batch).length > KEEPALIVE_LIMIT) queue.unshift(batch.pop());
        post(batch, true).catch(() => stats.failed++);
      }
      return inFlight;
    }
    inFlight = inFlight.then(async () => {
      while (queue.length > 0) {
        const batch = queue.splice(0, maxBatch);
        try {
          await post(batch, false);
        } catch (err) {
          // Put it back at the front: the next flush tries again.
          queue.unshift(...batch);
          stats.failed++;
          console.warn(`telemetry flush failed: ${err.message ?? err}`);
          return;
        }
      }
    });
    return inFlight;
  }

  setInterval(() => flush(), flushMs);
  document.addEventListener("visibilitychange", () => {
    record("visibility", { state: document.visibilityState });
    if (document.visibilityState === "hidden") flush({ keepalive: true });
  });
  addEventListener("pagehide", () => {
    record("page_hide");
    flush({ keepalive: true });
  });

  return { record, flush, stats, queue, session };
}

/** Standard instrumentation: navigation timing, clicks, errors, fetch responses. */
export function instrument(collector, { endpoint = "/telemetry/events" } = {}) {
  // Navigation timing is complete once `load` has finished.
  const navigation = () => {
    const nav = performance.getEntriesByType("navigation")[0];
    collector.record("navigation", {
      url: location.href,
      duration_ms: nav ? Math.round(nav.duration) : undefined,
      transfer_size: nav?.transferSize,
    });
  };
  if (document.readyState === "complete") navigation();
  else addEventListener("load", () => setTimeout(navigation), { once: true });
  addEventListener(
    "click",
    (e) => {
      const target = e.target.closest("[data-track]");
      if (target) collector.record("click", { target: target.dataset.track });
    },
    { capture: true },
  );
  addEventListener("error", (e) => collector.record("error", { message: e.message, source: e.filename }));
  addEventListener("unhandledrejection", (e) => collector.record("error", { message: String(e.reason) }));
  const original = window.fetch.bind(window);
  window.fetch = async (input, init) => {
    const url = input instanceof Request ? input.url : String(input);
    if (new URL(url, location.href).pathname === endpoint) return original(input, init);
    const started = performance.now();
    try {
      const response = await original(input, init);
      collector.record("network_response", {
        url,
        status: response.status,
        duration_ms: Math.round(performance.now() - started),
      });
      return response;
    } catch (err) {
      collector.record("network_error", { url, message: String(err) });
      throw err;
    }
  };
}
