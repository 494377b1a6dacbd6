// The browser half of access control (spec/05 "From a browser", spec/08
// "Gateway access control" and "Cross-origin reads"), in real Chromium:
//
//   issuer (node:crypto, JWKS)   page A 127.0.0.1:<a>  (allowed origin)
//            |                   page B 127.0.0.1:<b>  (not on the list)
//            v                          |
//   ursula gateway --auth-* --cors-allowed-origin http://127.0.0.1:<a>
//            |
//   ursula development node
//
// a. EventSource (no token) tails a public_read stream live.
// b. fetch + ReadableStream + Authorization: Bearer tails a private stream,
//    gets `event: credential-expired` at the token's exp, and resumes with a
//    fresh token from its last offset: every event once, in order.
// c. Page B, same page on another port, cannot read: the browser blocks it.

import { after, before, test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { startDevNode, startGateway, stopAll } from "../lib/processes.mjs";
import { startStaticServer } from "../lib/static-server.mjs";
import { launchChromium, recordConsole, screenshot } from "../lib/browser.mjs";
import { startIssuer } from "./issuer.mjs";

const PAGE = fileURLToPath(new URL("./page/", import.meta.url));
const OWNER = "alice";
const PUBLIC = "/public-feed/news";
const PRIVATE = "/alice-private/ticks";
const WAIT = 30_000;

let issuer;
let allowed; // page server on the allowed origin
let other; // the same page on an origin not on the list
let node;
let gateway;
let browser;
let dir;
const consoleLines = [];

function policy(iss) {
  return `# written by gateway-access.test.mjs
[[bucket]]
id = "public-feed"
public_read = true
owners = [{ issuer = "${iss}", subject = "${OWNER}" }]

[[bucket]]
id = "alice-private"
owners = [{ issuer = "${iss}", subject = "${OWNER}" }]
`;
}

const ownerToken = () => issuer.mint(OWNER, 600).token;

async function asOwner(method, path, { body, contentType = "application/json" } = {}) {
  const response = await fetch(`${gateway.url}${path}`, {
    method,
    headers: { Authorization: `Bearer ${ownerToken()}`, ...(body !== undefined ? { "Content-Type": contentType } : {}) },
    body,
  });
  await response.arrayBuffer();
  return response;
}

async function append(path, value) {
  const response = await asOwner("POST", path, { body: JSON.stringify(value) });
  assert.equal(response.status, 204, `append to ${path}`);
  return Date.now();
}

before(async () => {
  dir = await mkdtemp(join(tmpdir(), "ursula-browser-test-"));
  issuer = await startIssuer();
  allowed = await startStaticServer({ root: PAGE });
  other = await startStaticServer({ root: PAGE });
  const policyFile = join(dir, "access.toml");
  await writeFile(policyFile, policy(issuer.url));
  node = await startDevNode();
  gateway = await startGateway({
    upstream: node.url,
    args: [
      "--cors-allowed-origin", allowed.origin,
      "--auth-issuer", issuer.url,
      "--auth-audience", issuer.audience,
      "--auth-jwks-url", issuer.jwksUrl,
      "--auth-policy", policyFile,
    ],
    // `/__ursula/ready` is concealed under access control: ask as an owner.
    ready: async (url) => {
      const probe = await fetch(`${url}/alice-private/probe`, {
        method: "HEAD",
        headers: { Authorization: `Bearer ${ownerToken()}` },
      });
      return probe.status !== 503;
    },
  });
  for (const path of [PUBLIC, PRIVATE]) {
    const created = await asOwner("PUT", path, { body: "", contentType: "application/json" });
    assert.equal(created.status, 201, `creating ${path}`);
  }
  browser = await launchChromium();
});

after(async () => {
  await browser?.close();
  await allowed?.close();
  await other?.close();
  await issuer?.close();
  await stopAll();
  if (dir) await rm(dir, { recursive: true, force: true });
});

async function openViewer(site, name) {
  const page = await browser.newPage({ viewport: { width: 1000, height: 800 } });
  recordConsole(page, consoleLines);
  const query = new URLSearchParams({ gateway: gateway.url, issuer: issuer.url });
  await page.goto(`${site.url}?${query}`);
  await page.waitForFunction(() => window.viewerReady === true, null, { timeout: WAIT });
  page.name = name;
  return page;
}

async function waitInPage(page, fn, arg, what) {
  try {
    await page.waitForFunction(fn, arg, { timeout: WAIT });
  } catch (err) {
    const state = await page.evaluate(() => ({
      publicTail: { ...window.viewer.publicTail, source: undefined },
      privateTail: { ...window.viewer.privateTail, stop: undefined, resume: undefined },
    }));
    assert.fail(`${page.name}: ${what}: ${err.message}\n${JSON.stringify(state, null, 1)}\n${consoleLines.join("\n")}`);
  }
}

let pageA;

test("setup: the gateway conceals what strangers may not see", async () => {
  // Without a token: the private stream is concealed, the public one readable, writes refused.
  assert.equal((await fetch(`${gateway.url}${PRIVATE}?offset=-1`)).status, 404);
  assert.equal((await fetch(`${gateway.url}${PUBLIC}?offset=-1`)).status, 200);
  const anonymousWrite = await fetch(`${gateway.url}${PUBLIC}`, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: "{}",
  });
  assert.equal(anonymousWrite.status, 404, "public_read grants no writes");
  assert.ok(issuer.jwksFetches() >= 1, "the gateway fetched the issuer's JWKS");
});

test("a. EventSource on a public_read stream receives live events appended after it opened", async () => {
  pageA = await openViewer(allowed, "page A");
  const offset = await pageA.evaluate((path) => window.viewer.tailPublic(`${path}?offset=now&live=sse`), PUBLIC);
  assert.match(offset, /^\S+$/);
  const headlines = ["ursula ships", "streams are logs", "browsers tail them"];
  for (const headline of headlines) await append(PUBLIC, { headline });
  await waitInPage(
    pageA,
    (want) => JSON.stringify(window.viewer.publicTail.messages.map((m) => m.headline)) === JSON.stringify(want),
    headlines,
    "the public tail receives the three headlines",
  );
  const tail = await pageA.evaluate(() => ({ errors: window.viewer.publicTail.errors, opened: window.viewer.publicTail.opened }));
  assert.deepEqual(tail, { errors: 0, opened: true });

  // The allowed origin reads the continuation header (Access-Control-Expose-Headers: *).
  const catchUp = await pageA.evaluate((path) => window.viewer.probeFetch("A: catch-up of the public stream", `${path}?offset=-1`), PUBLIC);
  assert.equal(catchUp.ok, true);
  assert.equal(catchUp.status, 200);
  assert.match(catchUp.nextOffset ?? "", /^\S+$/, "Stream-Next-Offset is exposed to the allowed origin");
  assert.equal(catchUp.body.trim().split("\n").length, 3);
});

test("b. fetch + Bearer tails a private stream through credential-expired, and resumes without loss or repeat", async () => {
  const page = pageA ?? (await openViewer(allowed, "page A"));
  // Without a token the private stream is concealed, and the page sees that answer (CORS allowed).
  const anonymous = await page.evaluate((path) => window.viewer.probeFetch("A: private without token", `${path}?offset=-1`), PRIVATE);
  assert.deepEqual([anonymous.ok, anonymous.status], [true, 404]);

  const appendedAt = new Map();
  for (const n of [1, 2, 3]) appendedAt.set(n, await append(PRIVATE, { n }));

  // The first token expires a few seconds after the read starts.
  await page.evaluate(
    (path) => {
      window.viewer.tailPrivate({ path, subject: "alice", firstTtl: 6, ttl: 600, holdResume: true });
    },
    PRIVATE,
  );
  const valuesAre = (want) =>
    waitInPage(
      page,
      (w) => JSON.stringify(window.viewer.privateTail.values.map((v) => v.n)) === JSON.stringify(w),
      want,
      `the private tail holds ${JSON.stringify(want)}`,
    );
  await valuesAre([1, 2, 3]);
  // Appended while the first session is live (normally before its token expires).
  for (const n of [4, 5, 6]) appendedAt.set(n, await append(PRIVATE, { n }));

  // At exp the gateway ends the session with `event: credential-expired`.
  await waitInPage(page, () => window.viewer.privateTail.status === "held", null, "credential-expired ends the first session");
  const first = await page.evaluate(() => window.viewer.privateTail.sessions[0]);
  assert.equal(first.ended, "credential-expired");
  assert.deepEqual(JSON.parse(first.expiredData), { reason: "credential_expired" });
  assert.equal(first.from, "-1");
  assert.ok(Date.now() >= first.exp * 1000 - 1000, "the session did not end long before exp");
  // Every event acknowledged before exp was delivered before the end.
  for (const [n, at] of appendedAt) {
    if (at < first.exp * 1000 - 500) assert.ok(first.values.some((v) => v.n === n), `event ${n} came before credential-expired`);
  }
  assert.deepEqual(first.values.map((v) => v.n), [1, 2, 3, 4, 5, 6].slice(0, first.values.length));

  // While the page is disconnected, more events arrive; then it resumes with a fresh token.
  for (const n of [7, 8, 9]) await append(PRIVATE, { n });
  const offsetAtExpiry = await page.evaluate(() => window.viewer.privateTail.offset);
  await page.evaluate(() => window.viewer.privateTail.resume());
  await valuesAre([1, 2, 3, 4, 5, 6, 7, 8, 9]);
  for (const n of [10, 11, 12]) await append(PRIVATE, { n });
  await valuesAre([1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);

  const tail = await page.evaluate(() => {
    const t = window.viewer.privateTail;
    return { sessions: t.sessions, errors: t.errors, offset: t.offset };
  });
  assert.deepEqual(tail.errors, []);
  assert.equal(tail.sessions.length, 2, "one resume");
  const second = tail.sessions[1];
  assert.equal(second.status, 200);
  assert.equal(second.from, offsetAtExpiry, "resumed from the last streamNextOffset");
  assert.ok(second.exp > first.exp, "with a fresh token");
  assert.deepEqual(
    [...first.values, ...second.values].map((v) => v.n),
    [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12],
    "the two sessions together: every event once, in order",
  );
  assert.match(second.incarnation ?? "", /^\S+$/, "Stream-Incarnation is exposed");

  // The stream itself holds each event once.
  const stored = await fetch(`${gateway.url}${PRIVATE}?offset=-1`, { headers: { Authorization: `Bearer ${ownerToken()}` } });
  assert.deepEqual((await stored.text()).trim().split("\n").map((l) => JSON.parse(l).n), [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
  assert.equal(stored.headers.get("stream-next-offset"), tail.offset);

  // A catch-up read with a token reads the continuation header cross-origin.
  const token = ownerToken();
  const withToken = await page.evaluate(
    ({ path, token }) => window.viewer.probeFetch("A: private catch-up with Bearer", `${path}?offset=-1`, { token }),
    { path: PRIVATE, token },
  );
  assert.deepEqual([withToken.ok, withToken.status, withToken.nextOffset], [true, 200, tail.offset]);

  await page.evaluate(() => window.viewer.privateTail.stop());
  await waitInPage(page, () => window.viewer.privateTail.status === "stopped", null, "the private tail stops");
  await screenshot(page, "gateway-allowed-origin");
});

test("c. a page from an origin not on --cors-allowed-origin cannot read", async () => {
  const pageB = await openViewer(other, "page B");
  assert.notEqual(other.origin, allowed.origin);

  const plain = await pageB.evaluate((path) => window.viewer.probeFetch("B: catch-up of the public stream", `${path}?offset=-1`), PUBLIC);
  assert.equal(plain.ok, false, "fetch is blocked");
  assert.equal(plain.name, "TypeError");

  const token = ownerToken();
  const bearer = await pageB.evaluate(
    ({ path, token }) => window.viewer.probeFetch("B: private catch-up with Bearer", `${path}?offset=-1`, { token }),
    { path: PRIVATE, token },
  );
  assert.equal(bearer.ok, false, "even with a valid token: the preflight names no origin for B");
  assert.equal(bearer.name, "TypeError");

  const sse = await pageB.evaluate((path) => window.viewer.probeEventSource("B: EventSource on the public stream", `${path}?offset=-1&live=sse`), PUBLIC);
  assert.equal(sse.error, true, "EventSource errors");
  assert.equal(sse.opened, false);
  assert.equal(sse.data, 0);
  assert.equal(sse.readyStateAtError, 2, "EventSource.CLOSED: a CORS failure is not retried");

  // The public tail of page A, from page B: the EventSource fails.
  const tailB = await pageB.evaluate(async (path) => {
    try {
      await window.viewer.tailPublic(`${path}?offset=-1&live=sse`);
      return "opened";
    } catch (err) {
      return String(err);
    }
  }, PUBLIC);
  assert.equal(tailB, "Error: EventSource failed");
  assert.deepEqual(await pageB.evaluate(() => window.viewer.publicTail.messages), []);

  // The gateway did answer; the browser withheld it: no Access-Control-Allow-Origin for B.
  const direct = await fetch(`${gateway.url}${PUBLIC}?offset=-1`, { headers: { Origin: other.origin } });
  assert.equal(direct.status, 200);
  assert.equal(direct.headers.get("access-control-allow-origin"), null);
  const forA = await fetch(`${gateway.url}${PUBLIC}?offset=-1`, { headers: { Origin: allowed.origin } });
  assert.equal(forA.headers.get("access-control-allow-origin"), allowed.origin);

  // The page itself works: its own origin answers.
  assert.equal(await pageB.evaluate(async () => (await fetch("/index.html")).status), 200);
  await screenshot(pageB, "gateway-other-origin");
});
