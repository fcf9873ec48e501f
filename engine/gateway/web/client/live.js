// The two live transports of the window runtime (SPEC RT-8, RT-9): SSE
// read with `fetch` (so a request may carry an Authorization header, and
// reconnects are ours: jittered and bounded), one physical stream per
// subscription; and `realtime.v1` over one WebSocket that multiplexes the
// client's subscriptions. Both hand every event to the subscription's
// pipeline (feed.js) in arrival order and report how a connection ended as
// a closed failure kind; the reconnect owner (runtime.js) decides what
// follows. Neither logs or keeps a payload, cursor, token or raw reason.

import { decodeJson, jsonLimits, utf8Length } from "./json.js";
import { envelope, serverMessage, sseControl, SUBPROTOCOL } from "./schema.js";
import { SseParser, SseFailure } from "./event-stream.js";
import { CATEGORY_FAILURE, closeCategory, retryAfterMs, statusFailure } from "./backoff.js";
import { SerialQueue } from "./feed.js";

/** The reasons of a RESET_REQUIRED that end a subscription instead of a resync. */
const TERMINAL_RESET = new Set(["FORBIDDEN", "AUTH_REQUIRED", "PROTOCOL_MISMATCH"]);

/** Whether a Content-Type is exactly `text/event-stream` (parameters aside). */
export function isEventStream(type) {
  return typeof type === "string" && type.split(";")[0].trim().toLowerCase() === "text/event-stream";
}

/**
 * Checks one SSE application block (SPEC RT-8): a CURSOR event carries its
 * own `id`, equal to the envelope's resumeCursor; other profiles carry none.
 * Returns the envelope or a failure.
 */
export function sseEnvelope(block, limits) {
  const j = decodeJson(block.data, limits);
  if (!j.ok) return j;
  const e = envelope(j.value);
  if (!e.ok) return e;
  const own = e.value.recoveryMode === "CURSOR" ? block.id === e.value.resumeCursor : block.id === null;
  return own ? e : { ok: false, failure: "PROTOCOL_MISMATCH" };
}

/**
 * Runs one SSE connection for subscription `sub` until it ends; resolves
 * to `{ failure, hintMs }`: how it ended (a closed kind) and the server's
 * not-before hint, if any. `rt` is the runtime (env, events, metrics).
 */
export async function runSse(rt, sub, signal) {
  const env = rt.env;
  const gen = sub.feed.generation;
  const headers = { Accept: "text/event-stream", ...rt.credentials() };
  if (sub.feed.table.cursor !== null) headers["Last-Event-ID"] = sub.feed.table.cursor;
  rt.count("connectAttempts");
  // The open deadline: the answer's head must come within connectTimeoutMs.
  const open = new AbortController();
  signal.addEventListener("abort", () => open.abort());
  let late = false;
  const deadline = env.setTimeout(() => {
    late = true;
    open.abort();
  }, rt.connectTimeoutMs);
  let r;
  try {
    r = await env.fetch(rt.url(`/v1/streams/${encodeURIComponent(sub.stream)}/sse`), {
      headers, signal: open.signal, credentials: "same-origin", redirect: "error", cache: "no-store", referrerPolicy: "no-referrer",
    });
  } catch {
    return { failure: signal.aborted ? "ABORTED" : late ? "CONNECT_TIMEOUT" : "OFFLINE", hintMs: null };
  } finally {
    env.clearTimeout(deadline);
  }
  const hint = retryAfterMs(r.headers.get("Retry-After"));
  if (r.status !== 200) {
    cancel(r);
    return { failure: statusFailure(r.status, hint !== null), hintMs: hint };
  }
  if (!isEventStream(r.headers.get("Content-Type")) || !r.body) {
    cancel(r);
    return { failure: "PROTOCOL_MISMATCH", hintMs: null };
  }
  rt.opened(sub.channel);
  const parser = new SseParser();
  const reader = r.body.getReader();
  const limits = jsonLimits(rt.options.limits);
  const watchdog = rt.watchdog(() => reader.cancel().catch(() => {}));
  let ended = { failure: "OFFLINE", hintMs: null };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      watchdog.touch();
      sub.channel.alive = env.now();
      for (const item of parser.push(value)) {
        const stop = await sseItem(rt, sub, gen, item, limits);
        if (stop) {
          ended = stop;
          return ended;
        }
      }
    }
    parser.end();
  } catch (e) {
    if (e instanceof SseFailure) ended = { failure: e.failure, hintMs: null };
    else if (watchdog.fired) ended = { failure: "IDLE_TIMEOUT", hintMs: null };
    else if (signal.aborted) ended = { failure: "ABORTED", hintMs: null };
  } finally {
    watchdog.stop();
    reader.cancel().catch(() => {});
  }
  if (watchdog.fired) ended = { failure: "IDLE_TIMEOUT", hintMs: null };
  return ended;
}

function cancel(r) {
  r.body?.cancel().catch(() => {});
}

/** One parsed SSE item; returns how the stream ends, or null to go on. */
async function sseItem(rt, sub, gen, item, limits) {
  if (item.type === "retry") {
    if (item.ms <= rt.backoffPolicy.maxDelayMs) sub.retryHintMs = item.ms;
    return null;
  }
  if (item.type === "comment") return null;
  if (item.event === "control") {
    const j = decodeJson(item.data, limits);
    const c = j.ok ? sseControl(j.value) : j;
    if (!c.ok) return { failure: c.failure, hintMs: null };
    const control = c.value;
    if (control.type === "CLOSE") {
      rt.control(sub, { type: "CLOSE", category: control.category });
      return { failure: CATEGORY_FAILURE[control.category], hintMs: null };
    }
    if (control.type === "RESET_REQUIRED") {
      rt.control(sub, { type: "RESET_REQUIRED", reason: control.reason });
      if (TERMINAL_RESET.has(control.reason)) return { failure: control.reason, hintMs: null };
    } else {
      rt.control(sub, { type: "GAP" });
    }
    // Recover on this connection: the stream goes on after the control.
    const why = control.type === "GAP" ? "SEQUENCE_GAP" : control.reason;
    const failure = await rt.resync(sub, why);
    return failure ? { failure, hintMs: null } : null;
  }
  // An application event has no `event:` line (or the default name); any
  // other name is not in the protocol: fail closed.
  if (item.event !== "" && item.event !== "message") return { failure: "PROTOCOL_MISMATCH", hintMs: null };
  const e = sseEnvelope(item, limits);
  if (!e.ok) {
    rt.count("rejected");
    return { failure: e.failure, hintMs: null };
  }
  const received = rt.env.now();
  const act = rt.outcome(sub, await sub.feed.process(e.value, gen, received), received);
  if (act === null) return null;
  if (act.close) return { failure: act.close, hintMs: null };
  // A gap or a failed effect: recover on this connection.
  const failure = await rt.resync(sub, act.resync);
  return failure ? { failure, hintMs: null } : null;
}

/**
 * One `realtime.v1` WebSocket for the subscriptions of channel `ch` (SPEC
 * RT-9). Resolves when it closed, to `{ failure, hintMs }`: `hintMs` is
 * the server's CLOSE `retryAfterMs`, the only hint that lets an
 * OVERLOADED close be retried (SPEC RT-7; without it, DEGRADED). A
 * socket that closed before WELCOME without a CLOSE ends AUTH_REQUIRED
 * when `sessionRefused` says the gateway refuses its cookie, else OFFLINE.
 */
export function runWs(rt, ch, signal) {
  const env = rt.env;
  return new Promise((resolve) => {
    rt.count("connectAttempts");
    let ws;
    try {
      ws = new env.WebSocket(rt.wsUrl("/v1/ws"), SUBPROTOCOL);
    } catch {
      resolve({ failure: "PROTOCOL_MISMATCH", hintMs: null });
      return;
    }
    const s = new WsSession(rt, ws, ch);
    // The open deadline: WELCOME must come within connectTimeoutMs.
    s.deadline = env.setTimeout(() => s.welcome === null && s.finish("CONNECT_TIMEOUT"), rt.connectTimeoutMs);
    let settled = false;
    const finish = (failure, hintMs = null) => {
      if (settled) return;
      settled = true;
      s.done = true;
      s.stop();
      resolve({ failure, hintMs });
    };
    s.finish = (failure) => {
      s.ending ??= failure;
      try {
        ws.close(1000);
      } catch {
        // already closing
      }
      finish(failure);
    };
    signal.addEventListener("abort", () => s.finish("ABORTED"));
    ws.onopen = () => {
      if (ws.protocol !== SUBPROTOCOL) s.finish("PROTOCOL_MISMATCH");
    };
    ws.onmessage = (m) => {
      if (typeof m.data !== "string") return s.finish("PROTOCOL_MISMATCH"); // binary frames refused
      if (!s.queue.push({ text: m.data, at: env.now() }, utf8Length(m.data))) {
        rt.count("overflows");
        for (const sub of s.ch.subs) sub.needSnapshot = true;
        s.finish("QUEUE_OVERFLOW");
      }
    };
    ws.onclose = (e) => {
      if (s.category === null) s.lastWord();
      const category = s.category ?? closeCategory(e.code);
      const failure = s.ending ?? CATEGORY_FAILURE[category];
      const hintMs = s.ending ? null : s.retryAfterMs;
      const stream = ch.subs[0]?.stream;
      if (s.welcome !== null || s.ending !== null || s.category !== null || failure !== "OFFLINE" || !stream) {
        return finish(failure, hintMs);
      }
      // Gone before WELCOME without a word: a refused upgrade looks the
      // same as a lost network to a browser (1006). Ask the gateway.
      s.stop(); // no open deadline while the probe runs: it has its own
      sessionRefused(rt, stream, signal).then((refused) => finish(refused ? "AUTH_REQUIRED" : failure, hintMs));
      return undefined;
    };
    ws.onerror = () => {};
  });
}

/**
 * Whether the gateway refuses the credentials a WebSocket upgrade carries
 * (SPEC RT-7): after an upgrade that failed before WELCOME, one GET of
 * `stream`'s snapshot with the page's cookie only (no `headers()`: a
 * browser's WebSocket cannot send them), answered 401 exactly when the
 * session is not authenticated (say, a cookie a restarted gateway no
 * longer knows). The answer's body is not read. Resolves to true on a 401;
 * to false on any other answer, a network failure, an abort, or no
 * answer's head within connectTimeoutMs.
 */
export async function sessionRefused(rt, stream, signal) {
  const env = rt.env;
  const probe = new AbortController();
  const stop = () => probe.abort();
  signal.addEventListener("abort", stop);
  const deadline = env.setTimeout(stop, rt.connectTimeoutMs);
  try {
    const r = await env.fetch(rt.url(`/v1/streams/${encodeURIComponent(stream)}/snapshot`), {
      headers: { Accept: "application/json" }, signal: probe.signal, credentials: "same-origin", redirect: "error",
      cache: "no-store", referrerPolicy: "no-referrer",
    });
    cancel(r);
    return r.status === 401;
  } catch {
    return false;
  } finally {
    env.clearTimeout(deadline);
    signal.removeEventListener("abort", stop);
  }
}

/** The state of one WebSocket session: pending, live and tombstoned subscriptions. */
class WsSession {
  constructor(rt, ws, ch) {
    this.rt = rt;
    this.ws = ws;
    this.welcome = null;
    this.category = null;
    this.retryAfterMs = null; // the CLOSE's not-before hint, if it gave one
    this.ending = null;
    this.done = false; // closed: nothing more is sent or applied
    this.subs = new Map(); // subscriptionId -> sub
    this.tombstones = new Set();
    this.forgotten = new Set(); // ids the server dropped with RESET_REQUIRED
    this.ch = ch; // its subscriptions: those there at WELCOME, and those that join later
    this.serial = 0;
    this.nonce = null;
    this.timer = null;
    this.queue = new SerialQueue((m) => this.message(m.text, m.at), rt.options.queue);
    rt.sessions.add(this);
  }

  stop() {
    this.rt.env.clearTimeout(this.deadline);
    this.rt.env.clearTimeout(this.timer);
    this.queue.clear();
    this.rt.sessions.delete(this);
  }

  /**
   * Sends at once: the client queues nothing of its own, so the browser's
   * send buffer is the only outbound queue, checked against WELCOME's
   * queued-bytes limit (and each message against its size limit); past
   * either, QUEUE_OVERFLOW closes the connection (seed §7.5).
   */
  send(msg) {
    if (this.done) return undefined;
    const text = JSON.stringify(msg);
    const l = this.welcome.limits;
    if (text.length * 3 > l.maxMessageBytes || this.ws.bufferedAmount + text.length * 3 > l.maxQueuedBytes) {
      this.rt.count("overflows");
      return this.finish("QUEUE_OVERFLOW");
    }
    this.ws.send(text);
    return undefined;
  }

  /** Whether `sub` is subscribed (or subscribing) on this connection. */
  has(sub) {
    return this.subs.get(sub.wsId) === sub;
  }

  /** Sends SUBSCRIBE for `sub` under a fresh id. */
  subscribe(sub) {
    const id = `s${++this.serial}`;
    this.subs.set(id, sub);
    sub.wsId = id;
    sub.wsGen = sub.feed.generation;
    this.send({ type: "SUBSCRIBE", subscriptionId: id, streamId: sub.stream, cursor: sub.feed.table.cursor, scopeBinding: sub.feed.scope });
  }

  /** Sends UNSUBSCRIBE; the id stays tombstoned until UNSUBSCRIBED. */
  unsubscribe(sub) {
    if (!this.welcome || !this.subs.has(sub.wsId)) return;
    this.subs.delete(sub.wsId);
    this.tombstones.add(sub.wsId);
    this.send({ type: "UNSUBSCRIBE", subscriptionId: sub.wsId });
  }

  async message(text, received) {
    if (this.done) return undefined;
    const rt = this.rt;
    const limits = jsonLimits({ ...rt.options.limits, maxBytes: this.welcome?.limits.maxMessageBytes });
    const j = decodeJson(text, limits);
    const m = j.ok ? serverMessage(j.value) : j;
    if (!m.ok) {
      rt.count("rejected");
      return this.finish(m.failure);
    }
    const msg = m.value;
    if ((msg.type === "WELCOME") === (this.welcome !== null)) return this.finish("PROTOCOL_MISMATCH");
    switch (msg.type) {
      case "WELCOME":
        return this.welcomed(msg);
      case "CLOSE":
        return this.closing(msg);
      case "HEARTBEAT_ACK":
        if (msg.nonce !== this.nonce) return this.finish("PROTOCOL_MISMATCH");
        this.nonce = null;
        this.ch.alive = rt.env.now();
        this.ch.backoff.markStable();
        return undefined;
      case "UNSUBSCRIBED":
        if (!this.tombstones.delete(msg.subscriptionId)) return this.finish("PROTOCOL_MISMATCH");
        return undefined;
      default:
        break;
    }
    // Late, after UNSUBSCRIBE or a reset: no effect.
    if (this.tombstones.has(msg.subscriptionId) || this.forgotten.has(msg.subscriptionId)) return undefined;
    const sub = this.subs.get(msg.subscriptionId);
    if (!sub) return this.finish("PROTOCOL_MISMATCH");
    if (msg.type === "SUBSCRIBED") return this.subscribed(sub, msg);
    if (msg.type === "RESET_REQUIRED") return this.reset(sub, msg.subscriptionId, msg.reason);
    const act = rt.outcome(sub, await sub.feed.process(msg.envelope, sub.wsGen, rt.env.now()), received);
    if (act?.close) return this.finish(act.close);
    if (act?.resync) await this.recover(sub, msg.subscriptionId, act.resync);
    return undefined;
  }

  /** The server's CLOSE: its category and hint decide what the socket's end means. */
  closing(msg) {
    this.category = msg.category;
    this.retryAfterMs = msg.retryAfterMs ?? null;
    const control = { type: "CLOSE", category: msg.category };
    if (this.retryAfterMs !== null) control.retryAfterMs = this.retryAfterMs;
    for (const sub of this.ch.subs) this.rt.control(sub, control);
  }

  /**
   * The socket closed while events still wait in the apply queue: the
   * server's CLOSE, always its last message, may be among them, and its
   * category and hint are read now (the events behind it are dropped with
   * the generation; the next connection resumes from the last commit).
   */
  lastWord() {
    const last = this.queue.items.at(-1)?.item;
    if (!last || this.welcome === null || this.done) return;
    const j = decodeJson(last.text, jsonLimits({ ...this.rt.options.limits, maxBytes: this.welcome.limits.maxMessageBytes }));
    const m = j.ok ? serverMessage(j.value) : j;
    if (m.ok && m.value.type === "CLOSE") this.closing(m.value);
  }

  welcomed(msg) {
    const cap = (v, c) => Math.min(v, c);
    this.welcome = {
      heartbeat: msg.heartbeat,
      limits: {
        maxMessageBytes: cap(msg.limits.maxMessageBytes, 64 * 1024),
        maxSubscriptions: cap(msg.limits.maxSubscriptions, 32),
        maxQueuedBytes: cap(msg.limits.maxQueuedBytes, 256 * 1024),
      },
    };
    this.rt.opened(this.ch);
    for (const sub of this.ch.subs.slice(0, this.welcome.limits.maxSubscriptions)) {
      if (sub.needSnapshot) this.rt.joinLive(sub); // joined after the attempt's snapshots
      else this.subscribe(sub);
    }
    this.beat();
  }

  /** One outstanding HEARTBEAT at a time, at half the longest interval the server allows. */
  beat() {
    const h = this.welcome.heartbeat;
    const every = Math.max(h.minIntervalMs, Math.floor(h.maxIntervalMs / 2));
    const env = this.rt.env;
    this.timer = env.setTimeout(() => {
      if (this.nonce !== null) {
        // Hidden documents' timers are throttled: no verdict while hidden.
        if (!this.rt.hidden()) return this.finish("IDLE_TIMEOUT");
      } else {
        this.nonce = `h${++this.serial}`;
        this.send({ type: "HEARTBEAT", nonce: this.nonce });
      }
      this.beat();
      return undefined;
    }, this.nonce === null ? every : h.ackTimeoutMs);
  }

  subscribed(sub, msg) {
    const why = sub.feed.table.acceptSubscribed(msg.streamEpoch, msg.acceptedCursor, msg.next);
    if (why === null) return undefined;
    return this.recover(sub, msg.subscriptionId, "SEQUENCE_GAP");
  }

  async reset(sub, id, reason) {
    this.rt.control(sub, { type: "RESET_REQUIRED", reason });
    if (TERMINAL_RESET.has(reason)) {
      this.subs.delete(id);
      this.forgotten.add(id);
      this.rt.stopSub(sub, reason);
      return;
    }
    await this.recover(sub, id, reason, true);
  }

  /** Snapshot, then SUBSCRIBE again from its checkpoint (the server forgot `id` after a reset). */
  async recover(sub, id, why, forgotten = false) {
    if (!forgotten) {
      this.unsubscribe(sub);
    } else {
      this.subs.delete(id);
      this.forgotten.add(id);
    }
    const failure = await this.rt.resync(sub, why);
    if (failure) return this.finish(failure);
    if (!this.done) this.subscribe(sub);
    return undefined;
  }
}
