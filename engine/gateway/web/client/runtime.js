// The window runtime (seed §3.1, §5): the client a page creates. It owns
// the physical connections (one SSE stream per subscription, or one
// WebSocket for all, or a poll lease per subscription), takes the
// authoritative snapshots, runs the reconnect owner (SPEC RT-7), follows
// page visibility, pagehide / pageshow and online / offline (seed §5.4),
// and reports closed status events and counters (SPEC RT-15).
//
// What it keeps: stream ids, sequences, counters, and in memory only the
// current cursor and scope token the protocol needs. Status events and
// metrics never carry a token, cursor, epoch, scope, event id or payload
// (seed §12.3); credentials are asked for per request and never stored.

import { Backoff, Retry, reconnectPolicy, retryClass } from "./backoff.js";
import { PollLease, pollPolicy } from "./poll.js";
import { Feed } from "./feed.js";
import { runSse, runWs } from "./live.js";
import { takeSnapshot } from "./snapshot.js";
import { listen } from "./lifecycle.js";

/** Failures after which the next connection starts from a new snapshot. */
const NEEDS_SNAPSHOT = new Set(["CURSOR_EXPIRED", "EVENT_CONFLICT", "SCOPE_PROTOCOL_VIOLATION", "QUEUE_OVERFLOW",
  "SEQUENCE_GAP", "APPLY_FAILED"]);
/** Resyncs in a row without an applied event before the connection is given up to the reconnect owner. */
const MAX_RESYNC_STREAK = 3;

const COUNTERS = ["connectAttempts", "opens", "reconnects", "accepted", "rejected", "duplicate", "stale", "gaps",
  "conflicts", "resyncs", "snapshots", "polls", "pollNotModified", "overflows", "degraded"];

/** The browser's globals, or the stand-ins a test passes (`options.env`). */
function environment(e = {}) {
  const g = globalThis;
  return {
    fetch: e.fetch ?? ((...a) => g.fetch(...a)),
    WebSocket: e.WebSocket ?? g.WebSocket,
    now: e.now ?? (() => Date.now()),
    random: e.random ?? Math.random,
    setTimeout: e.setTimeout ?? ((f, ms) => g.setTimeout(f, ms)),
    clearTimeout: e.clearTimeout ?? ((t) => g.clearTimeout(t)),
    document: "document" in e ? e.document : g.document,
    window: "window" in e ? e.window : g.window,
    navigator: "navigator" in e ? e.navigator : g.navigator,
    location: "location" in e ? e.location : g.location,
  };
}

/** See `createClient` in client.js. */
export class RealtimeClient {
  constructor(options = {}) {
    const transport = options.transport ?? "sse";
    if (!["sse", "ws", "poll"].includes(transport)) throw new RangeError("transport must be sse, ws or poll");
    this.transport = transport;
    this.options = options;
    this.env = environment(options.env);
    this.backoffPolicy = reconnectPolicy(options.reconnect);
    this.pollPolicy = pollPolicy(options.poll);
    this.hiddenGraceMs = Math.min(options.hiddenGraceMs ?? 60_000, 300_000);
    this.idleTimeoutMs = Math.min(options.idleTimeoutMs ?? 45_000, 300_000);
    this.connectTimeoutMs = Math.min(options.connectTimeoutMs ?? 20_000, 30_000);
    this.counters = Object.fromEntries(COUNTERS.map((k) => [k, 0]));
    this.applyLagMaxMs = 0; // the longest receive-to-commit time seen
    this.listeners = { status: new Set(), control: new Set() };
    this.subs = new Set();
    this.sessions = new Set();
    this.ws = null; // the WebSocket channel, shared by every subscription
    this.authFlight = null; // the auth recovery running, if any (single flight)
    this.closed = false;
    this.lifecycle = this.listen();
  }

  // ---- public API (documented in client.js / client.d.ts) ----

  subscribe(stream, handlers = {}) {
    if (this.closed) throw new Error("the client is closed");
    if (typeof stream !== "string" || !/^[A-Za-z0-9._-]{1,64}$/.test(stream)) throw new RangeError("not a stream id");
    if (this.transport === "ws" && this.ws && this.ws.subs.length >= 32) throw new RangeError("32 subscriptions per connection");
    const feed = new Feed({ streamId: stream, eventTypes: handlers.eventTypes ?? null, map: handlers.map,
      effect: (event, ctx) => handlers.onEvent?.(event, ctx), dedupe: this.options.dedupe });
    const sub = { stream, handlers, feed, needSnapshot: true, retryHintMs: null, closed: false, resyncStreak: 0,
      authTried: false, channel: null, lease: null, leaseTimer: null, status: null, wsId: null, wsGen: 0 };
    this.subs.add(sub);
    if (this.transport === "poll") {
      this.startPoll(sub);
    } else if (this.transport === "sse") {
      sub.channel = this.channel([sub]);
      this.connect(sub.channel);
    } else if (this.ws === null) {
      this.ws = this.channel([sub]);
      sub.channel = this.ws;
      this.connect(this.ws);
    } else {
      sub.channel = this.ws;
      this.ws.subs.push(sub);
      // Open: snapshot and SUBSCRIBE now; else the next WELCOME does it.
      if (this.ws.running) this.joinLive(sub);
      else this.connect(this.ws);
    }
    return () => this.unsubscribe(sub);
  }

  on(type, fn) {
    this.listeners[type].add(fn);
    return () => this.listeners[type].delete(fn);
  }

  metrics() {
    let high = 0;
    for (const s of this.sessions) high = Math.max(high, s.queue.highWater);
    let ids = 0;
    for (const sub of this.subs) ids = Math.max(ids, sub.feed.table.window.size);
    const now = this.env.now();
    let active = 0;
    let age = null;
    for (const ch of this.channels()) {
      if (ch.alive === null) continue;
      active++;
      age = Math.max(age ?? 0, now - ch.alive);
    }
    return { ...this.counters, subscriptions: this.subs.size, activeConnections: active, heartbeatAgeMs: age,
      queueHighWater: high, dedupeIds: ids, applyLagMaxMs: this.applyLagMaxMs };
  }

  close() {
    for (const sub of [...this.subs]) this.unsubscribe(sub);
    this.closed = true;
    this.lifecycle();
  }

  /**
   * The user's manual retry: every subscription that gave up (DEGRADED,
   * a stopped poll lease, a failed snapshot) starts over with a fresh
   * budget. Refusals stay refused: a FORBIDDEN subscription was removed.
   */
  retry() {
    for (const ch of this.channels()) {
      if (ch.running || ch.timer !== null || ch.paused || ch.stopped) continue;
      ch.backoff.reset();
      this.connect(ch);
    }
    for (const sub of this.subs) if (sub.lease && sub.lease.stopped !== null && !sub.paused) this.startPoll(sub);
  }

  // ---- channels and the reconnect owner (SPEC RT-7) ----

  channel(subs) {
    return { subs, backoff: new Backoff(this.backoffPolicy), abort: null, timer: null, stableTimer: null,
      running: false, paused: null, hiddenTimer: null, stopped: null, alive: null };
  }

  /** One attempt: snapshots where needed, then the connection, then what its end means. */
  async connect(ch) {
    const env = this.env;
    env.clearTimeout(ch.timer);
    ch.timer = null;
    if (ch.running || ch.subs.length === 0 || this.closed) return;
    if (env.navigator && env.navigator.onLine === false) return this.state(ch, "offline");
    ch.running = true;
    ch.paused = null;
    const abort = (ch.abort = new AbortController());
    for (const sub of ch.subs) sub.feed.fence();
    this.state(ch, ch.backoff.attempt === 0 ? "connecting" : "reconnecting", { attempt: ch.backoff.attempt });
    let end = null;
    for (const sub of ch.subs) {
      if (!sub.needSnapshot) continue;
      const failure = await this.takeSnapshot(sub, abort.signal);
      if (failure) {
        end = { failure, hintMs: null };
        break;
      }
    }
    end ??= this.transport === "sse" ? await runSse(this, ch.subs[0], abort.signal) : await runWs(this, ch, abort.signal);
    ch.running = false;
    ch.abort = null;
    ch.alive = null; // not open: no heartbeat age
    env.clearTimeout(ch.stableTimer);
    if (abort.signal.aborted || this.closed) return undefined; // a lifecycle step or unsubscribe: it set the state
    return this.failed(ch, end.failure, end.hintMs ?? (this.transport === "sse" ? ch.subs[0]?.retryHintMs : null));
  }

  async failed(ch, failure, hintMs) {
    const env = this.env;
    for (const sub of ch.subs) {
      if (NEEDS_SNAPSHOT.has(failure) || sub.feed.table.cursor === null) sub.needSnapshot = true;
    }
    if (failure === "AUTH_REQUIRED") {
      // The session owner recovers credentials once (single flight); then one more attempt.
      const sub = ch.subs.find((s) => s.handlers.onAuthRequired && !s.authTried);
      if (sub) {
        sub.authTried = true;
        try {
          await this.recoverAuth(sub.handlers.onAuthRequired);
          return this.connect(ch);
        } catch {
          // recovery failed: AUTH_REQUIRED below
        }
      }
    }
    if (env.navigator && env.navigator.onLine === false) return this.state(ch, "offline", { failure: "OFFLINE" });
    if (hintMs == null && retryClass(failure) === Retry.THROTTLED) {
      // A snapshot refused with 429 / 503 names its own Retry-After.
      const hints = ch.subs.map((s) => s.lastAnswer?.hint).filter((h) => h != null);
      if (hints.length > 0) hintMs = Math.max(...hints);
    }
    const r = ch.backoff.failed(failure, env.now(), hintMs ?? null, env.random());
    if (r.retry) {
      this.count("reconnects");
      this.state(ch, "reconnecting", { failure, attempt: ch.backoff.attempt, delayMs: r.delayMs });
      ch.timer = env.setTimeout(() => this.connect(ch), r.delayMs);
      return undefined;
    }
    if (r.degraded) {
      this.count("degraded");
      return this.state(ch, "degraded", { failure, degraded: r.degraded });
    }
    ch.stopped = failure; // never retried; only a new subscription starts again
    return this.state(ch, failure === "CLOSED" ? "closed" : "stopped", { failure });
  }

  /**
   * Runs the embedder's auth recovery `hook` single flight: while one
   * recovery runs, every channel that fails AUTH_REQUIRED waits for the
   * same one (and shares its outcome) instead of starting another.
   */
  recoverAuth(hook) {
    this.authFlight ??= Promise.resolve()
      .then(() => hook())
      .finally(() => {
        this.authFlight = null;
      });
    return this.authFlight;
  }

  /** Channel `ch`'s connection opened (SSE: its 200 head; WebSocket: WELCOME). */
  opened(ch) {
    const env = this.env;
    this.count("opens");
    ch.backoff.opened(env.now());
    ch.alive = env.now();
    env.clearTimeout(ch.stableTimer);
    ch.stableTimer = env.setTimeout(() => {
      if (ch.backoff.stableAt(env.now())) for (const s of ch.subs) s.authTried = false;
    }, this.backoffPolicy.stableAfterMs);
    this.state(ch, "open", {});
  }

  markStable(sub) {
    sub?.channel?.backoff.markStable();
  }

  /** A subscription joins a WebSocket already open: snapshot, then SUBSCRIBE. */
  async joinLive(sub) {
    const session = [...this.sessions][0];
    if (!session || !session.welcome || session.has(sub)) return; // the next WELCOME subscribes it
    const failure = await this.takeSnapshot(sub, this.ws.abort?.signal);
    if (failure) return this.stopSub(sub, failure);
    if (!sub.closed) session.subscribe(sub);
    return undefined;
  }

  unsubscribe(sub) {
    if (sub.closed) return;
    sub.closed = true;
    this.subs.delete(sub);
    sub.lease?.stop("ABORTED");
    this.env.clearTimeout(sub.leaseTimer);
    const ch = sub.channel;
    if (ch) {
      ch.subs = ch.subs.filter((s) => s !== sub);
      for (const s of this.sessions) s.unsubscribe(sub);
      if (ch.subs.length === 0) {
        this.env.clearTimeout(ch.timer);
        ch.abort?.abort();
        if (ch === this.ws) this.ws = null;
      }
    }
    this.emit(sub, "closed", {});
  }

  /** A subscription the server refused for good (RESET_REQUIRED FORBIDDEN, ...). */
  stopSub(sub, failure) {
    const ch = sub.channel;
    this.subs.delete(sub);
    sub.closed = true;
    if (ch) {
      ch.subs = ch.subs.filter((s) => s !== sub);
      if (ch.subs.length === 0) ch.abort?.abort(); // nothing left on the connection
    }
    this.emit(sub, "stopped", { failure });
  }

  // ---- the apply pipeline's outcomes and authoritative recovery ----

  /**
   * Counts an outcome of an event received at `received`; returns null,
   * `{resync: failure}` or `{close: failure}`.
   */
  outcome(sub, o, received) {
    switch (o.kind) {
      case "APPLIED":
        this.count("accepted");
        this.applyLagMaxMs = Math.max(this.applyLagMaxMs, this.env.now() - received);
        sub.resyncStreak = 0;
        this.markStable(sub);
        return null;
      case "IGNORED":
        if (o.failure === "DUPLICATE_EVENT") this.count("duplicate");
        else if (o.failure === "STALE_EVENT") this.count("stale");
        return null;
      case "RESYNC":
        if (o.failure === "SEQUENCE_GAP") this.count("gaps");
        if (o.failure === "EVENT_CONFLICT") this.count("conflicts");
        if (o.failure === "EVENT_CONFLICT" || o.failure === "SCOPE_PROTOCOL_VIOLATION") {
          sub.needSnapshot = true;
          return { close: o.failure };
        }
        return { resync: o.failure };
      default:
        this.count("rejected");
        return { close: o.failure };
    }
  }

  /**
   * Gap, reset or failed effect: pause, take a snapshot, adopt its
   * checkpoint (seed §4.4). Returns null, or the failure that ends the
   * connection (the snapshot failed, or too many resyncs in a row).
   */
  async resync(sub, why) {
    this.count("resyncs");
    if (++sub.resyncStreak > MAX_RESYNC_STREAK) return why;
    this.emit(sub, "resyncing", { failure: why });
    const failure = await this.takeSnapshot(sub, sub.channel?.abort?.signal);
    if (failure) return failure;
    this.emit(sub, "open", {});
    return null;
  }

  /** See snapshot.js. */
  takeSnapshot(sub, signal, etag = null) {
    return takeSnapshot(this, sub, signal, etag);
  }

  // ---- bounded polling (SPEC RT-11) ----

  startPoll(sub) {
    sub.lease = new PollLease(this.pollPolicy, this.env.now());
    sub.paused = null;
    this.emit(sub, "open", {});
    this.pollStep(sub);
  }

  pollStep(sub) {
    if (sub.closed || sub.paused) return;
    const n = sub.lease.next(this.env.now());
    if (n.stopped) {
      if (n.stopped === "ABORTED") return;
      if (n.stopped === "POLL_BUDGET_EXHAUSTED") this.count("degraded");
      this.emit(sub, n.stopped === "POLL_BUDGET_EXHAUSTED" ? "degraded" : "stopped", { failure: n.stopped });
      return;
    }
    if (n.wait !== undefined) {
      sub.leaseTimer = this.env.setTimeout(() => this.pollStep(sub), n.wait);
      return;
    }
    if (n.inFlight) return;
    this.poll(sub);
  }

  async poll(sub) {
    const lease = sub.lease;
    this.count("polls");
    const failure = await this.takeSnapshot(sub, undefined, lease.etag);
    if (lease !== sub.lease || sub.closed) return;
    const a = sub.lastAnswer ?? { status: 0, etag: null, hint: null };
    const verdict = lease.answered(this.env.now(), failure === "OFFLINE" && !sub.lastAnswer ? 503 : a.status, a.etag, a.hint);
    sub.lastAnswer = null;
    if (verdict === "UNCHANGED") this.count("pollNotModified");
    if (verdict === "CHANGED" && failure) {
      lease.etag = null; // the effect did not run: fetch it whole next time
      if (failure !== "APPLY_FAILED") {
        lease.stop(failure);
        return this.emit(sub, "stopped", { failure });
      }
    }
    this.pollStep(sub);
    return undefined;
  }

  // ---- page lifecycle and network (seed §5.4): lifecycle.js ----

  listen() {
    return listen(this);
  }

  hidden() {
    return this.env.document?.visibilityState === "hidden";
  }

  channels() {
    const out = new Set();
    for (const sub of this.subs) if (sub.channel) out.add(sub.channel);
    return [...out];
  }

  // ---- small helpers ----

  credentials() {
    const h = this.options.headers?.();
    return h ? { ...h } : {};
  }

  url(path) {
    return (this.options.baseUrl ?? this.env.location?.origin ?? "") + path;
  }

  wsUrl(path) {
    if (this.options.wsUrl) return this.options.wsUrl;
    return this.url(path).replace(/^http/, "ws");
  }

  count(key, n = 1) {
    this.counters[key] += n;
  }

  /** An SSE idle watchdog: `onFire` when no byte came for idleTimeoutMs (not while hidden). */
  watchdog(onFire) {
    const env = this.env;
    const w = { fired: false, timer: null };
    const arm = () => {
      env.clearTimeout(w.timer);
      w.timer = env.setTimeout(() => {
        if (this.hidden()) return arm();
        w.fired = true;
        onFire();
        return undefined;
      }, this.idleTimeoutMs);
    };
    w.touch = arm;
    w.stop = () => env.clearTimeout(w.timer);
    arm();
    return w;
  }

  control(sub, c) {
    sub.handlers.onControl?.(c);
    for (const fn of this.listeners.control) fn({ stream: sub.stream, ...c });
  }

  state(ch, state, extra) {
    for (const sub of ch.subs) this.emit(sub, state, extra);
  }

  emit(sub, state, extra) {
    const status = Object.freeze({ stream: sub.stream, transport: this.transport, state, ...extra });
    sub.status = status;
    try {
      sub.handlers.onStatus?.(status);
    } catch {
      // a subscriber's status handler cannot break the runtime
    }
    for (const fn of this.listeners.status) {
      try {
        fn(status);
      } catch {
        // likewise
      }
    }
  }
}
