// Page visibility, online / offline and the open deadline (seed §5.4,
// SPEC RT-7, RT-11): a hidden page stops polling and, after its grace,
// its live connection; offline stops every attempt and timer until online.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../client.js";
import { snap, virtualTime, answer } from "./helpers.mjs";

function page() {
  const document = new EventTarget();
  document.visibilityState = "visible";
  const window = new EventTarget();
  const navigator = { onLine: true };
  return {
    document, window, navigator,
    hide() { document.visibilityState = "hidden"; document.dispatchEvent(new Event("visibilitychange")); },
    show() { document.visibilityState = "visible"; document.dispatchEvent(new Event("visibilitychange")); },
    offline() { navigator.onLine = false; window.dispatchEvent(new Event("offline")); },
    online() { navigator.onLine = true; window.dispatchEvent(new Event("online")); },
  };
}

function setup(transport, routes) {
  const t = virtualTime();
  const p = page();
  const seen = [];
  const fetch = (url, init) => {
    seen.push(url);
    return routes(url, init);
  };
  const statuses = [];
  const c = createClient({
    transport, baseUrl: "http://h", hiddenGraceMs: 30_000,
    env: { fetch, now: t.now, random: () => 0.5, setTimeout: t.setTimeout, clearTimeout: t.clearTimeout,
      document: p.document, window: p.window, navigator: p.navigator, location: null },
  });
  c.subscribe("demo", { onStatus: (s) => statuses.push(s.state) });
  return { t, p, c, seen, statuses };
}

const snapshot = () => answer(200, { body: JSON.stringify(snap("3")), headers: { ETag: '"e1-3"' } });

/** An SSE answer whose body stays open until the request is aborted. */
function openStream(init) {
  const body = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode(": hello\n\n"));
      init.signal.addEventListener("abort", () => c.error(new DOMException("aborted", "AbortError")));
    },
  });
  return answer(200, { body, headers: { "Content-Type": "text/event-stream" } });
}

test("a hidden page stops polling; visible again starts a new lease", async () => {
  const { t, p, seen, statuses } = setup("poll", () => snapshot());
  await t.advance(12_000);
  const before = seen.length;
  assert.equal(before, 3, "at 0, 5 and 10 s");
  p.hide();
  await t.advance(600_000);
  assert.equal(seen.length, before, "no poll while hidden");
  assert.equal(statuses.at(-1), "paused");
  assert.equal(t.pending(), 0, "no timer while hidden");
  p.show();
  await t.advance(0);
  assert.equal(seen.length, before + 1);
});

test("a hidden page keeps its live connection for the grace period, then closes it; visible reconnects from a snapshot", async () => {
  const { t, p, seen, statuses } = setup("sse", (url, init) => (url.endsWith("/snapshot") ? snapshot() : openStream(init)));
  await t.advance(0);
  assert.equal(statuses.at(-1), "open");
  p.hide();
  await t.advance(29_000);
  assert.equal(statuses.at(-1), "open", "within the grace");
  await t.advance(2_000);
  assert.equal(statuses.at(-1), "paused");
  const asked = seen.length;
  await t.advance(600_000);
  assert.equal(seen.length, asked);
  p.show();
  await t.advance(0);
  assert.deepEqual(seen.slice(asked).map((u) => u.split("/").pop()), ["snapshot", "sse"]);
  assert.equal(statuses.at(-1), "open");
});

test("offline aborts the connection and every timer; online reconnects after a jitter", async () => {
  const { t, p, seen, statuses } = setup("sse", (url, init) => (url.endsWith("/snapshot") ? snapshot() : openStream(init)));
  await t.advance(0);
  p.offline();
  await t.advance(0);
  assert.equal(statuses.at(-1), "offline");
  const asked = seen.length;
  await t.advance(600_000);
  assert.equal(seen.length, asked, "no attempt while offline");
  assert.equal(t.pending(), 0);
  p.online();
  await t.advance(1_000);
  assert.equal(seen.length, asked + 1, "one attempt, from the cursor (no snapshot)");
  assert.equal(seen.at(-1), "http://h/v1/streams/demo/sse");
  assert.equal(statuses.at(-1), "open");
});

test("an answer that never comes is CONNECT_TIMEOUT, and retried", async () => {
  const { t, seen, statuses, c } = setup("sse", (url, init) => (url.endsWith("/snapshot") ? snapshot()
    : new Promise((_, reject) => init.signal.addEventListener("abort", () => reject(new DOMException("aborted", "AbortError"))))));
  const full = [];
  c.on("status", (x) => full.push(x));
  await t.advance(20_000);
  assert.equal(full.some((x) => x.state === "reconnecting" && x.failure === "CONNECT_TIMEOUT"), true, JSON.stringify(full));
  assert.equal(c.metrics().reconnects, 1);
  await t.advance(1_000);
  assert.equal(seen.filter((u) => u.endsWith("/sse")).length, 2);
  c.close();
  assert.equal(statuses.at(-1), "closed");
});

test("an online hint never retries a refused feed", async () => {
  const { t, p, seen, statuses } = setup("sse", (url) => (url.endsWith("/snapshot") ? snapshot() : answer(403)));
  await t.advance(0);
  assert.equal(statuses.at(-1), "stopped");
  const asked = seen.length;
  p.offline();
  p.online();
  await t.advance(600_000);
  assert.equal(seen.length, asked);
  assert.equal(statuses.at(-1), "stopped", "still shown as refused");
});
