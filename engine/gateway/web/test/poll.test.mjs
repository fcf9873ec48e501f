// SPEC RT-11: the poll lease.
import { test } from "node:test";
import assert from "node:assert/strict";
import { PollLease, pollPolicy } from "../client/poll.js";

test("one request at a time, at least five seconds apart, ETag kept across 304", () => {
  const l = new PollLease({}, 0);
  assert.deepEqual(l.next(0), { send: true });
  assert.deepEqual(l.next(0), { inFlight: true }, "single flight");
  assert.deepEqual(l.next(60_000), { inFlight: true }, "however long the answer takes");
  assert.equal(l.answered(100, 200, '"e-1"', null), "CHANGED");
  assert.equal(l.etag, '"e-1"');
  assert.deepEqual(l.next(1_000), { wait: 4_100 });
  assert.deepEqual(l.next(5_100), { send: true });
  assert.equal(l.answered(5_100, 304, null, null), "UNCHANGED");
  assert.equal(l.etag, '"e-1"');
  assert.equal(l.attempts, 2);
});

test("Retry-After is a not-before bound and never shortens the interval", () => {
  const l = new PollLease({}, 0);
  l.next(0);
  assert.equal(l.answered(0, 429, null, 30_000), "RETRY");
  assert.deepEqual(l.next(0), { wait: 30_000 });
  l.next(30_000);
  assert.equal(l.answered(30_000, 503, null, 1_000), "RETRY");
  assert.deepEqual(l.next(30_000), { wait: 5_000 });
});

test("the closed mapping stops the lease for good", () => {
  for (const [status, failure] of [[401, "AUTH_REQUIRED"], [403, "FORBIDDEN"], [404, "UNSUPPORTED"], [409, "CURSOR_EXPIRED"],
    [410, "CURSOR_EXPIRED"], [302, "PROTOCOL_MISMATCH"]]) {
    const l = new PollLease({}, 0);
    l.next(0);
    assert.deepEqual(l.answered(0, status, null, null), { stopped: failure });
    assert.deepEqual(l.next(60_000), { stopped: failure });
  }
});

test("120 attempts or 30 minutes, then POLL_BUDGET_EXHAUSTED", () => {
  const l = new PollLease({}, 0);
  let now = 0;
  for (let i = 0; i < 120; i++) {
    assert.deepEqual(l.next(now), { send: true });
    l.answered(now, 304, null, null);
    now += 5_000;
  }
  assert.deepEqual(l.next(now), { stopped: "POLL_BUDGET_EXHAUSTED" });
  const m = new PollLease({}, 0);
  m.next(0);
  m.answered(0, 429, null, 31 * 60_000);
  assert.deepEqual(m.next(0), { stopped: "POLL_BUDGET_EXHAUSTED" }, "a hint past the lease ends it");
  assert.throws(() => pollPolicy({ minIntervalMs: 4_999 }));
  assert.throws(() => pollPolicy({ maxAttempts: 121 }));
  assert.throws(() => pollPolicy({ maxDurationMs: 31 * 60_000 }));
});
