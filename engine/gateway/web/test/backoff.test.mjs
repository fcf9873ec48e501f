// SPEC RT-7: full jitter, budgets ending in DEGRADED, no retry of refusals.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Backoff, closeCategory, statusFailure, CATEGORY_FAILURE, reconnectPolicy, retryAfterMs } from "../client/backoff.js";

test("delays are full jitter under base * 2^attempt, capped, never under the hint", () => {
  const b = new Backoff({ baseMs: 100 });
  const caps = [];
  for (let i = 0; i < 10; i++) {
    const r = b.failed("OFFLINE", i, null, 0.999999);
    assert.equal(r.retry, true);
    caps.push(r.delayMs);
  }
  assert.deepEqual(caps, [100, 200, 400, 800, 1600, 3200, 6400, 12800, 25600, 51200]);
  const low = new Backoff({ baseMs: 100 });
  assert.equal(low.failed("OFFLINE", 0, null, 0).delayMs, 0, "zero is a valid full-jitter draw");
  assert.equal(low.failed("OFFLINE", 0, 2000, 0).delayMs, 2000, "never sooner than the server's hint");
});

test("ten attempts, then DEGRADED, and it stays DEGRADED", () => {
  const b = new Backoff({});
  let now = 0;
  for (let i = 0; i < 10; i++) {
    const r = b.failed("OFFLINE", now, null, 0.01);
    assert.equal(r.retry, true, `attempt ${i + 1}`);
    now += r.delayMs + 10;
  }
  const r = b.failed("OFFLINE", now, null, 0.01);
  assert.deepEqual(r, { retry: false, degraded: "ATTEMPTS_EXHAUSTED", failure: "OFFLINE" });
  assert.equal(b.failed("OFFLINE", now + 1, null, 0.01).degraded, "ATTEMPTS_EXHAUSTED");
  b.reset();
  assert.equal(b.failed("OFFLINE", now + 2, null, 0.01).retry, true, "a manual retry or online hint starts over");
});

test("the elapsed budget: a delay that would overrun it is not shortened", () => {
  const b = new Backoff({ maxElapsedMs: 10_000, baseMs: 1000 });
  assert.equal(b.failed("OFFLINE", 0, null, 0).retry, true);
  assert.deepEqual(b.failed("OFFLINE", 9_000, 5_000, 0).degraded, "ELAPSED_EXHAUSTED");
  const c = new Backoff({});
  assert.equal(c.failed("OFFLINE", 0, 61_000, 0).degraded, "HINT_ABOVE_MAX_DELAY");
  const d = new Backoff({});
  assert.equal(d.failed("RATE_LIMITED", 0, null, 0).degraded, "HINT_MISSING", "throttled without a hint: no retry");
  assert.equal(new Backoff({}).failed("RATE_LIMITED", 0, 3000, 0).delayMs, 3000);
});

test("FORBIDDEN, PROTOCOL_MISMATCH, AUTH_REQUIRED and terminal closes are never retried", () => {
  for (const f of ["FORBIDDEN", "PROTOCOL_MISMATCH", "AUTH_REQUIRED", "MALFORMED_EVENT", "CLOSED", "ABORTED"]) {
    const b = new Backoff({});
    assert.deepEqual(b.failed(f, 0, 1000, 0.5), { retry: false, degraded: null, failure: f }, f);
    assert.equal(b.attempt, 0);
  }
  assert.equal(statusFailure(403, false), "FORBIDDEN");
  assert.equal(statusFailure(204, false), "CLOSED");
  assert.equal(statusFailure(302, false), "PROTOCOL_MISMATCH", "redirects are refused");
  assert.equal(statusFailure(503, true), "PROVIDER_UNAVAILABLE");
  assert.equal(CATEGORY_FAILURE[closeCategory(4403)], "FORBIDDEN");
  assert.equal(CATEGORY_FAILURE[closeCategory(1002)], "PROTOCOL_MISMATCH");
  assert.equal(closeCategory(1006), "NETWORK_LOST");
  assert.equal(retryAfterMs(" 3 "), 3000);
  assert.equal(retryAfterMs("Wed, 21 Oct 2015 07:28:00 GMT"), null);
});

test("the attempt counter resets only after a stable open", () => {
  const b = new Backoff({ stableAfterMs: 10_000 });
  b.failed("OFFLINE", 0, null, 0);
  b.failed("OFFLINE", 1, null, 0);
  b.opened(100);
  assert.equal(b.stableAt(5_000), false);
  b.failed("OFFLINE", 5_000, null, 0); // open 4.9 s: still the same outage
  assert.equal(b.attempt, 3);
  b.opened(6_000);
  b.failed("OFFLINE", 16_000, null, 0); // open 10 s: a new outage
  assert.equal(b.attempt, 1);
  b.opened(20_000);
  b.markStable();
  assert.equal(b.attempt, 0);
});

test("policies may be lowered, never raised", () => {
  assert.throws(() => reconnectPolicy({ maxAttempts: 11 }), /maxAttempts/);
  assert.throws(() => reconnectPolicy({ maxDelayMs: 60_001 }), /maxDelayMs/);
  assert.throws(() => reconnectPolicy({ maxElapsedMs: 300_001 }), /maxElapsedMs/);
  assert.equal(reconnectPolicy({ maxAttempts: 2 }).maxAttempts, 2);
});
