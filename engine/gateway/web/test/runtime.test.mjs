// The window runtime driven by stand-ins for fetch and the clock: the
// reconnect owner's budgets and refusals, recovery on RESET_REQUIRED, the
// poll lease, and what status events and metrics may hold.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../client.js";
import { env, snap, virtualTime, answer, bytes } from "./helpers.mjs";

const SECRET = "Bearer secret-token";

/** A fetch stand-in: `routes(url, init)` answers; every request is recorded. */
function fakeFetch(routes) {
  const seen = [];
  const fetch = async (url, init) => {
    seen.push({ url, headers: { ...init.headers } });
    return routes(url, init, seen);
  };
  return { fetch, seen, count: (part) => seen.filter((r) => r.url.includes(part)).length };
}

/** An SSE body the test writes to. */
function sseBody() {
  let ctl;
  const stream = new ReadableStream({ start: (c) => { ctl = c; } });
  return { stream, write: (s) => ctl.enqueue(bytes(s)), end: () => ctl.close() };
}

function client(t, fetch, over = {}) {
  const statuses = [];
  const c = createClient({
    transport: "sse", baseUrl: "http://h", headers: () => ({ Authorization: SECRET }),
    env: { fetch, now: t.now, random: () => 0.5, setTimeout: t.setTimeout, clearTimeout: t.clearTimeout,
      document: null, window: null, navigator: null, location: null },
    ...over,
  });
  c.on("status", (s) => statuses.push(s));
  return { c, statuses };
}

const snapshotAnswer = (last = "0") => answer(200, { body: JSON.stringify(snap(last)), headers: { "Content-Type": "application/json", ETag: `"e1-${last}"` } });

test("FORBIDDEN is never retried", async () => {
  const t = virtualTime();
  const f = fakeFetch((url) => (url.endsWith("/snapshot") ? snapshotAnswer() : answer(403)));
  const { c, statuses } = client(t, f.fetch);
  c.subscribe("demo", {});
  await t.advance(600_000);
  assert.equal(f.count("/sse"), 1);
  assert.deepEqual(statuses.at(-1), { stream: "demo", transport: "sse", state: "stopped", failure: "FORBIDDEN" });
  assert.equal(t.pending(), 0, "no timer left");
  c.close();
});

test("a wrong content type is PROTOCOL_MISMATCH, never retried", async () => {
  const t = virtualTime();
  const f = fakeFetch((url) => (url.endsWith("/snapshot") ? snapshotAnswer() : answer(200, { body: "no", headers: { "Content-Type": "text/plain" } })));
  const { c, statuses } = client(t, f.fetch);
  c.subscribe("demo", {});
  await t.advance(600_000);
  assert.equal(f.count("/sse"), 1);
  assert.equal(statuses.at(-1).failure, "PROTOCOL_MISMATCH");
});

test("a server that stays away: the attempt budget, then DEGRADED and silence", async () => {
  const t = virtualTime();
  const f = fakeFetch((url) => {
    if (url.endsWith("/snapshot") && f.count("/snapshot") === 1) return snapshotAnswer("4");
    throw new TypeError("connection refused");
  });
  const { c, statuses } = client(t, f.fetch, { reconnect: { maxAttempts: 3 } });
  c.subscribe("demo", {});
  await t.advance(600_000);
  const states = statuses.map((s) => s.state);
  assert.deepEqual(states.filter((s) => s === "reconnecting").length, 3 * 2, "three retries (announced, then started)");
  assert.deepEqual(statuses.at(-1), { stream: "demo", transport: "sse", state: "degraded", failure: "OFFLINE", degraded: "ATTEMPTS_EXHAUSTED" });
  const asked = f.seen.length;
  await t.advance(600_000);
  assert.equal(f.seen.length, asked, "no request after DEGRADED");
  assert.equal(c.metrics().degraded, 1);
  c.retry(); // the user's manual retry: a fresh budget
  await t.advance(600_000);
  assert.equal(f.seen.length > asked, true);
  assert.equal(statuses.at(-1).state, "degraded");
});

test("events apply in order from the snapshot; RESET_REQUIRED resyncs; nothing secret is reported", async () => {
  const t = virtualTime();
  const body = sseBody();
  let snaps = 0;
  const f = fakeFetch((url) => {
    if (url.endsWith("/snapshot")) return snapshotAnswer(++snaps === 1 ? "2" : "9");
    return answer(200, { body: body.stream, headers: { "Content-Type": "text/event-stream" } });
  });
  const { c, statuses } = client(t, f.fetch);
  const applied = [], states = [], controls = [];
  c.subscribe("demo", {
    onSnapshot: (state, ctx) => states.push(ctx.sequence),
    onEvent: (e, ctx) => applied.push(ctx.sequence),
    onControl: (x) => controls.push(x),
  });
  await t.advance(0);
  assert.equal(f.seen[1].headers["Last-Event-ID"], "c1.2", "resumes from the snapshot's cursor, in a header");
  assert.equal(f.seen[1].url, "http://h/v1/streams/demo/sse", "no cursor or token in the address");
  const block = (s, over = {}) => `id: c1.${s}\ndata: ${JSON.stringify(env({ sequence: String(s), ...over }))}\n\n`;
  body.write("retry: 2000\n\n" + block(2) + block(3) + block(3) + block(4));
  await t.advance(0);
  assert.deepEqual(applied, ["3", "4"], "stale 2 and duplicate 3 dropped");
  body.write('event: control\ndata: {"type":"RESET_REQUIRED","reason":"CURSOR_EXPIRED"}\n\n' + block(9) + block(10));
  await t.advance(0);
  assert.deepEqual(states, ["2", "9"]);
  assert.deepEqual(applied, ["3", "4", "10"]);
  assert.deepEqual(controls, [{ type: "RESET_REQUIRED", reason: "CURSOR_EXPIRED" }]);
  body.write(block(12));
  await t.advance(0);
  assert.equal(c.metrics().gaps, 1);
  assert.equal(snaps, 3, "a gap takes a snapshot");
  const m = c.metrics();
  assert.equal(m.activeConnections, 1);
  assert.equal(m.heartbeatAgeMs, 0);
  assert.equal(m.applyLagMaxMs, 0, "virtual time stands still while events apply");
  await t.advance(1_000);
  assert.equal(c.metrics().heartbeatAgeMs, 1_000);
  const reported = JSON.stringify([statuses, c.metrics()]);
  for (const secret of ["secret-token", "c1.", "scope-1", "e1", "ev-"]) assert.equal(reported.includes(secret), false, secret);
  c.close();
  body.end();
});

test("a CLOSE RESTART reconnects with the last committed cursor, no sooner than retry:", async () => {
  const t = virtualTime();
  const bodies = [sseBody(), sseBody()];
  let n = 0;
  const f = fakeFetch((url) => (url.endsWith("/snapshot") ? snapshotAnswer("0")
    : answer(200, { body: bodies[n++].stream, headers: { "Content-Type": "text/event-stream" } })));
  const { c, statuses } = client(t, f.fetch);
  c.subscribe("demo", {});
  await t.advance(0);
  bodies[0].write(`retry: 2000\n\nid: c1.1\ndata: ${JSON.stringify(env())}\n\nevent: control\ndata: {"type":"CLOSE","category":"RESTART"}\n\n`);
  await t.advance(0);
  const r = statuses.find((s) => s.state === "reconnecting" && s.delayMs !== undefined);
  assert.equal(r.delayMs >= 2000, true);
  await t.advance(r.delayMs);
  assert.equal(f.count("/sse"), 2);
  assert.equal(f.seen.at(-1).headers["Last-Event-ID"], "c1.1");
  assert.equal(f.count("/snapshot"), 1, "a cursor resume needs no snapshot");
  c.close();
});

test("polling: conditional, single flight, at least five seconds apart; a 403 ends the lease", async () => {
  const t = virtualTime();
  let inFlight = 0, most = 0;
  const times = [];
  let release = null;
  const f = fakeFetch(async (url, init) => {
    times.push(t.now());
    inFlight++;
    most = Math.max(most, inFlight);
    if (times.length === 2) await new Promise((r) => { release = r; });
    inFlight--;
    if (times.length === 4) return answer(403);
    return init.headers["If-None-Match"] ? answer(304, { headers: { ETag: '"e1-0"' } }) : snapshotAnswer("0");
  });
  const { c, statuses } = client(t, f.fetch, { transport: "poll" });
  const snaps = [];
  c.subscribe("demo", { onSnapshot: (s, ctx) => snaps.push(ctx.sequence) });
  await t.advance(5_000);
  await t.advance(60_000);
  assert.equal(times.length, 2, "the second request is still out: no other one");
  release();
  await t.advance(60_000);
  assert.equal(most, 1);
  assert.equal(f.seen[1].headers["If-None-Match"], '"e1-0"');
  for (let i = 1; i < times.length; i++) assert.equal(times[i] - times[i - 1] >= 5_000, true);
  assert.deepEqual(snaps, ["0"], "a 304 applies nothing");
  assert.equal(c.metrics().pollNotModified >= 1, true);
  assert.equal(statuses.at(-1).failure, "FORBIDDEN");
  const asked = times.length;
  await t.advance(600_000);
  assert.equal(times.length, asked);
});

for (const [name, block, failure] of [
  ["an unknown event name", "event: weird\ndata: {}\n\n", "PROTOCOL_MISMATCH"],
  ["a CURSOR event without its own id", `data: ${JSON.stringify(env({ sequence: "1" }))}\n\n`, "PROTOCOL_MISMATCH"],
  ["a malformed event", "id: c1.1\ndata: {\"protocol\":\n\n", "MALFORMED_EVENT"],
  ["an event of another stream", `id: c1.1\ndata: ${JSON.stringify(env({ streamId: "other" }))}\n\n`, "MALFORMED_EVENT"],
]) {
  test(`${name} fails closed: no effect, no retry`, async () => {
    const t = virtualTime();
    const body = sseBody();
    const f = fakeFetch((url) => (url.endsWith("/snapshot") ? snapshotAnswer("0")
      : answer(200, { body: body.stream, headers: { "Content-Type": "text/event-stream" } })));
    const { c, statuses } = client(t, f.fetch);
    const applied = [];
    c.subscribe("demo", { onEvent: (e, ctx) => applied.push(ctx.sequence) });
    await t.advance(0);
    body.write(block + `id: c1.1\ndata: ${JSON.stringify(env())}\n\n`);
    await t.advance(600_000);
    assert.deepEqual(applied, []);
    assert.equal(f.count("/sse"), 1);
    assert.deepEqual(statuses.at(-1), { stream: "demo", transport: "sse", state: "stopped", failure });
  });
}

test("a rate-limited snapshot is retried no sooner than its Retry-After", async () => {
  const t = virtualTime();
  const body = sseBody();
  let n = 0;
  const f = fakeFetch((url) => {
    if (url.endsWith("/snapshot")) return ++n === 1 ? answer(429, { headers: { "Retry-After": "3" } }) : snapshotAnswer("0");
    return answer(200, { body: body.stream, headers: { "Content-Type": "text/event-stream" } });
  });
  const { c, statuses } = client(t, f.fetch);
  c.subscribe("demo", {});
  await t.advance(0);
  const r = statuses.find((s) => s.state === "reconnecting" && s.delayMs !== undefined);
  assert.deepEqual([r.failure, r.delayMs >= 3000], ["RATE_LIMITED", true]);
  await t.advance(3_000);
  assert.equal(statuses.at(-1).state, "open");
  c.close();
  body.end();
});
