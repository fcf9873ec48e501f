// Full-jitter reconnect with finite budgets (SPEC RT-7, RT-13), and the
// closed mappings from what a server answered (an HTTP status, a close
// code, a close category) to a failure and whether it may be retried
// (seed §5.3, §6.3, §7.4). The same machine as the Rust client's
// `Reconnect` (engine/realtime/src/client/reconnect.rs).
//
// Pure: time (`now`, ms) and randomness (`random`, a draw in [0, 1)) are
// passed in.

/** SPEC RT-13 ceilings; the defaults add a 500 ms base and a 10 s stable-open window. */
export const RECONNECT_CEILING = Object.freeze({ maxDelayMs: 60_000, maxAttempts: 10, maxElapsedMs: 300_000 });
export const RECONNECT_DEFAULTS = Object.freeze({ baseMs: 500, ...RECONNECT_CEILING, stableAfterMs: 10_000 });

/**
 * How a failure is retried:
 * - NETWORK: network loss, timeouts, 502/503/504, a RESTART: local full jitter plus any server hint;
 * - THROTTLED: 429, a 503 with Retry-After, OVERLOADED: only with a server not-before hint;
 * - NO_RETRY: AUTH_REQUIRED, FORBIDDEN, PROTOCOL_MISMATCH, schema failures, a terminal close.
 */
export const Retry = Object.freeze({ NETWORK: "NETWORK", THROTTLED: "THROTTLED", NO_RETRY: "NO_RETRY" });

/** The failure kinds never retried by reconnecting (seed §5.3). */
const NEVER = new Set(["AUTH_REQUIRED", "FORBIDDEN", "PROTOCOL_MISMATCH", "MALFORMED_EVENT", "EVENT_TOO_LARGE",
  "MAPPING_CONTRACT_VIOLATION", "UNSUPPORTED", "ABORTED", "CLOSED"]);
const THROTTLED = new Set(["RATE_LIMITED", "PROVIDER_UNAVAILABLE"]);

/** How a failure kind (SPEC RT-14) is retried. */
export function retryClass(failure) {
  if (NEVER.has(failure)) return Retry.NO_RETRY;
  return THROTTLED.has(failure) ? Retry.THROTTLED : Retry.NETWORK;
}

/**
 * A close category (SPEC RT-9) as the failure it is handled as. NORMAL is
 * CLOSED (no reconnect); CURSOR_RESET asks for a snapshot and a new
 * connection (CURSOR_EXPIRED, retried as network).
 */
export const CATEGORY_FAILURE = Object.freeze({
  NORMAL: "CLOSED", RESTART: "OFFLINE", OVERLOADED: "RATE_LIMITED", AUTH_REQUIRED: "AUTH_REQUIRED",
  FORBIDDEN: "FORBIDDEN", PROTOCOL_MISMATCH: "PROTOCOL_MISMATCH", CURSOR_RESET: "CURSOR_EXPIRED", NETWORK_LOST: "OFFLINE",
});

/** A WebSocket close code as its category (the codec's table; every other code is NETWORK_LOST). */
export function closeCategory(code) {
  switch (code) {
    case 1000: return "NORMAL";
    case 1001: case 1012: return "RESTART";
    case 1013: case 1014: case 4429: return "OVERLOADED";
    case 4401: return "AUTH_REQUIRED";
    case 1008: case 4403: return "FORBIDDEN";
    case 1002: case 1003: case 1007: case 1009: case 1010: return "PROTOCOL_MISMATCH";
    case 4409: case 4410: return "CURSOR_RESET";
    default: return "NETWORK_LOST";
  }
}

/**
 * An HTTP answer other than the expected success (SSE 200, snapshot 200/304)
 * as a failure kind (seed §6.3, §9.4): 204 terminal close, 401 auth, 403
 * forbidden, 404 unsupported, 409/410 cursor reset, 429 rate limited,
 * 502/503/504 provider unavailable (503 with a hint: throttled), anything
 * else a protocol failure (redirects included).
 */
export function statusFailure(status, hasHint) {
  switch (status) {
    case 204: return "CLOSED";
    case 401: return "AUTH_REQUIRED";
    case 403: return "FORBIDDEN";
    case 404: return "UNSUPPORTED";
    case 409: case 410: return "CURSOR_EXPIRED";
    case 429: return "RATE_LIMITED";
    case 503: return hasHint ? "PROVIDER_UNAVAILABLE" : "OFFLINE";
    case 502: case 504: return "OFFLINE";
    default: return "PROTOCOL_MISMATCH";
  }
}

/** `Retry-After` in seconds (delay-seconds only) as milliseconds, else null. */
export function retryAfterMs(value) {
  return typeof value === "string" && /^[0-9]{1,9}$/.test(value.trim()) ? Number(value.trim()) * 1000 : null;
}

/**
 * Checks and completes a reconnect policy: lowered from the ceilings, never
 * raised; throws a RangeError naming the field otherwise.
 */
export function reconnectPolicy(p = {}) {
  const c = { ...RECONNECT_DEFAULTS, ...p };
  const within = (k, lo, hi) => {
    if (!(Number.isFinite(c[k]) && c[k] >= lo && c[k] <= hi)) throw new RangeError(`reconnect.${k} must be ${lo}..${hi}`);
  };
  within("maxDelayMs", 1, RECONNECT_CEILING.maxDelayMs);
  within("maxAttempts", 1, RECONNECT_CEILING.maxAttempts);
  within("maxElapsedMs", 1, RECONNECT_CEILING.maxElapsedMs);
  within("stableAfterMs", 1, RECONNECT_CEILING.maxElapsedMs);
  within("baseMs", 1, c.maxDelayMs);
  return Object.freeze(c);
}

/**
 * One physical connection's reconnect state (SPEC RT-7): `delay =
 * random(0, min(maxDelay, base * 2^attempt))`, `effective = max(delay,
 * hint)`; at most `maxAttempts` retries and `maxElapsedMs` from the first
 * failure of an outage, then DEGRADED. A delay that would overrun the
 * budget, or a hint above the largest delay, is not shortened: it ends in
 * DEGRADED. The attempt counter resets only after a stable open (open for
 * `stableAfterMs`, or `markStable` on a valid event or heartbeat).
 * DEGRADED is sticky until `reset` (a manual retry, an online hint).
 */
export class Backoff {
  constructor(policy) {
    this.policy = reconnectPolicy(policy);
    this.attempt = 0;
    this.outageStart = null;
    this.openSince = null;
    this.degraded = null;
  }

  /** A connection opened at `now` (not yet stable). */
  opened(now) {
    this.openSince = now;
  }

  /** Resets the budget if the connection has been open long enough at `now`. */
  stableAt(now) {
    const stable = this.openSince !== null && now - this.openSince >= this.policy.stableAfterMs;
    if (stable) this.reset();
    return stable;
  }

  /** The open connection proved itself (a valid event or heartbeat). */
  markStable() {
    if (this.openSince !== null) this.reset();
  }

  /** Forgets the outage and any DEGRADED state. */
  reset() {
    this.attempt = 0;
    this.outageStart = null;
    this.degraded = null;
  }

  /**
   * What follows a failure of kind `failure` at `now`; `hintMs` is the
   * server's not-before bound from now (Retry-After, SSE `retry`, null if
   * none); `random` a uniform draw in [0, 1).
   * @returns {{retry:true,delayMs:number}|{retry:false,degraded:string|null,failure:string}}
   */
  failed(failure, now, hintMs, random) {
    if (this.openSince !== null && now - this.openSince >= this.policy.stableAfterMs) this.reset();
    this.openSince = null;
    const how = retryClass(failure);
    if (how === Retry.NO_RETRY) return { retry: false, degraded: null, failure };
    const r = this.nextDelay(how, now, hintMs, random);
    if (typeof r === "string") {
      this.degraded ??= r;
      return { retry: false, degraded: this.degraded, failure };
    }
    this.attempt++;
    return { retry: true, delayMs: r };
  }

  nextDelay(how, now, hintMs, random) {
    if (this.degraded !== null) return this.degraded;
    const p = this.policy;
    this.outageStart ??= now;
    const elapsed = now - this.outageStart;
    if (this.attempt >= p.maxAttempts) return "ATTEMPTS_EXHAUSTED";
    if (elapsed >= p.maxElapsedMs) return "ELAPSED_EXHAUSTED";
    if (how === Retry.THROTTLED && hintMs == null) return "HINT_MISSING";
    const hint = hintMs ?? 0;
    if (hint > p.maxDelayMs) return "HINT_ABOVE_MAX_DELAY";
    const cap = Math.min(p.maxDelayMs, p.baseMs * 2 ** this.attempt);
    const jitter = Math.floor(Math.min(Math.max(random, 0), 0.9999999999) * (cap + 1));
    const delay = Math.max(jitter, hint);
    if (elapsed + delay > p.maxElapsedMs) return "ELAPSED_EXHAUSTED";
    return delay;
  }
}
