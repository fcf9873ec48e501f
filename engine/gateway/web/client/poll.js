// Bounded polling, the client's side (SPEC RT-11): a lease of conditional
// snapshot requests at least 5 s apart, at most 120 of them or 30
// minutes, one in flight at a time, the server's Retry-After respected,
// and a closed mapping of answers. The same machine as the Rust client's
// `PollLease` (engine/realtime/src/client/poll.rs).
//
// Pure: `now` (ms) is passed in. The driver asks `next(now)`, sends one
// request with `If-None-Match: lease.etag`, and reports `answered(...)`.

/** SPEC RT-11 / RT-13: the interval may only grow; attempts and duration only shrink. */
export const POLL_CEILING = Object.freeze({ minIntervalMs: 5_000, maxAttempts: 120, maxDurationMs: 30 * 60_000 });

/** Checks and completes a poll policy; throws a RangeError naming the field. */
export function pollPolicy(p = {}) {
  const c = { ...POLL_CEILING, ...p };
  if (!(Number.isFinite(c.minIntervalMs) && c.minIntervalMs >= POLL_CEILING.minIntervalMs)) {
    throw new RangeError("poll.minIntervalMs may not be below 5000");
  }
  if (!(Number.isSafeInteger(c.maxAttempts) && c.maxAttempts >= 1 && c.maxAttempts <= POLL_CEILING.maxAttempts)) {
    throw new RangeError("poll.maxAttempts must be 1..120");
  }
  if (!(Number.isFinite(c.maxDurationMs) && c.maxDurationMs >= 1 && c.maxDurationMs <= POLL_CEILING.maxDurationMs)) {
    throw new RangeError("poll.maxDurationMs must be 1..1800000");
  }
  return Object.freeze(c);
}

/** Why a lease stopped, as a failure kind (SPEC RT-14) per answer. */
const STOPS = { 401: "AUTH_REQUIRED", 403: "FORBIDDEN", 404: "UNSUPPORTED", 409: "CURSOR_EXPIRED", 410: "CURSOR_EXPIRED" };

/** One polling lease. */
export class PollLease {
  constructor(policy, now) {
    this.policy = pollPolicy(policy);
    this.started = now;
    this.attempts = 0;
    this.inFlight = false;
    this.notBefore = now;
    this.etag = null;
    this.stopped = null;
  }

  /**
   * When the next request may go: `{ send: true }` means now (the attempt
   * is counted and the lease is in flight until `answered`); `{ wait: ms }`
   * to wait; `{ inFlight: true }` while a request is out (single flight);
   * `{ stopped: failure }` once the lease is over (POLL_BUDGET_EXHAUSTED or
   * the answer mapping's stop). A stopped lease never sends again.
   */
  next(now) {
    if (this.stopped !== null) return { stopped: this.stopped };
    if (this.inFlight) return { inFlight: true };
    const p = this.policy;
    const over = this.attempts >= p.maxAttempts || now - this.started >= p.maxDurationMs ||
      this.notBefore - this.started >= p.maxDurationMs;
    if (over) {
      this.stopped = "POLL_BUDGET_EXHAUSTED";
      return { stopped: this.stopped };
    }
    if (now < this.notBefore) return { wait: this.notBefore - now };
    this.attempts++;
    this.inFlight = true;
    return { send: true };
  }

  /**
   * The answer to the request in flight: its status, ETag (200, 304) and
   * Retry-After in ms (429, 503). The next request goes no sooner than the
   * minimum interval, or the hint if later.
   * @returns {"CHANGED"|"UNCHANGED"|"RETRY"|{stopped:string}}
   */
  answered(now, status, etag, retryAfterMs) {
    this.inFlight = false;
    this.notBefore = now + Math.max(this.policy.minIntervalMs, retryAfterMs ?? 0);
    if (status === 200) {
      this.etag = etag ?? null;
      return "CHANGED";
    }
    if (status === 304) return "UNCHANGED";
    if (status === 429 || (status >= 500 && status <= 599)) return "RETRY";
    this.stopped = STOPS[status] ?? "PROTOCOL_MISMATCH";
    return { stopped: this.stopped };
  }

  /** Ends the lease (hidden page, offline, unsubscribe, a live feed took over). */
  stop(failure = "ABORTED") {
    this.stopped ??= failure;
    this.inFlight = false;
  }
}
