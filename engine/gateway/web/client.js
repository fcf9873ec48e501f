// DTP realtime client for browsers: an ES module, no build step, served
// by the gateway at /v1/client.js (types at /v1/client.d.ts).
//
//   import { createClient } from "/v1/client.js";
//   const client = createClient({ transport: "sse" });          // or "ws", "poll"
//   const stop = client.subscribe("demo", {
//     onSnapshot(state, ctx) { ... },  // the authoritative state; ctx.sequence
//     onEvent(event, ctx) { ... },     // strictly in sequence, one at a time
//     onStatus(status) { ... },        // connecting | open | resyncing | reconnecting |
//   });                                // offline | paused | degraded | stopped | closed
//   client.metrics();                  // counters, never ids, cursors or payloads
//   client.retry();                    // the user's manual retry after "degraded"
//   stop();
//
// What it does (SPEC RT-4, RT-5, RT-7, RT-11, RT-13): every event goes
// through byte ceiling -> UTF-8 -> JSON with depth/count ceilings -> exact
// keys -> registry -> scope and generation fence -> epoch / sequence /
// dedupe -> mapper -> effect -> commit, the commit strictly after the
// effect. Duplicates and stale events are dropped; a gap, a conflict, a
// RESET_REQUIRED or an unknown epoch recover from a snapshot and its
// checkpoint. Reconnects use full jitter within 10 attempts or 5 minutes,
// never sooner than the server's hint, then DEGRADED; an OVERLOADED close
// (a WebSocket that fell behind) is retried only with its `retryAfterMs`
// hint, resuming from the last committed cursor; FORBIDDEN,
// PROTOCOL_MISMATCH and malformed streams are never retried; AUTH_REQUIRED
// (a WebSocket closed before WELCOME is told from a lost network by one
// snapshot request with the cookie alone: 401) calls the subscription's
// `onAuthRequired` once, single flight, and tries once more. Polling is a
// lease: conditional GETs at least 5 s apart, one in flight, at most 120
// or 30 minutes. Hidden pages stop polling and, after a grace period,
// close live connections; offline stops every attempt until online.
//
// The pure parts are exported for tests and for other runtimes; they take
// time (`now`, ms) and randomness (`random`, in [0, 1)) as arguments.

import { RealtimeClient } from "./client/runtime.js";

export { JSON_CEILINGS, SNAPSHOT_CEILINGS, jsonLimits, decodeJson, parseStrict } from "./client/json.js";
export {
  FAILURE_KINDS, CLOSE_CATEGORIES, ENVELOPE_PROTOCOL, SUBPROTOCOL, MAX_RETRY_AFTER_MS, envelope as decodeEnvelopeValue, checkpoint as decodeCheckpointValue,
  snapshot as decodeSnapshotValue, serverMessage as decodeServerMessageValue, sseControl as decodeSseControlValue, isId, isToken,
  parseSequence, isRfc3339,
} from "./client/schema.js";
export { SequenceTable, Verdict, DEDUPE_CEILING, digest } from "./client/order.js";
export { Backoff, RECONNECT_CEILING, RECONNECT_DEFAULTS, Retry, retryClass, reconnectPolicy, closeCategory, statusFailure, retryAfterMs, CATEGORY_FAILURE } from "./client/backoff.js";
export { PollLease, POLL_CEILING, pollPolicy } from "./client/poll.js";
export { SseParser, SSE_MAX_BUFFER } from "./client/event-stream.js";
export { Feed, SerialQueue, QUEUE_CEILING, defaultMap } from "./client/feed.js";
export { sseEnvelope, isEventStream } from "./client/live.js";

/**
 * Creates a realtime client: one owner of its connections, snapshots and
 * reconnects.
 *
 * @param {object} [options]
 * @param {"sse"|"ws"|"poll"} [options.transport="sse"] SSE (fetch-streamed, one per subscription),
 *   `realtime.v1` WebSocket (one, multiplexed) or bounded polling of the snapshot
 * @param {string} [options.baseUrl] origin of the endpoints (default: the page's)
 * @param {string} [options.wsUrl] the WebSocket endpoint (default: baseUrl's /v1/ws, ws: or wss:)
 * @param {() => Record<string,string>} [options.headers] headers for each SSE and snapshot request
 *   (e.g. Authorization), asked for per request and never kept; default: the session cookie
 * @param {{baseMs?:number,maxDelayMs?:number,maxAttempts?:number,maxElapsedMs?:number,stableAfterMs?:number}} [options.reconnect]
 *   lowered from the SPEC RT-13 ceilings (10 attempts, 5 min, 60 s); a higher value throws
 * @param {{minIntervalMs?:number,maxAttempts?:number,maxDurationMs?:number}} [options.poll]
 *   the poll lease (at least 5 s apart, at most 120 attempts or 30 min)
 * @param {{maxIds?:number,maxAgeMs?:number}} [options.dedupe] dedupe window (2,048 ids or 10 min at most)
 * @param {{maxEvents?:number,maxBytes?:number}} [options.queue] WebSocket apply queue (256 events or 4 MiB at most)
 * @param {{maxBytes?:number,maxDepth?:number,maxElements?:number}} [options.limits] JSON ceilings (64 KiB, 16, 4,096 at most)
 * @param {number} [options.hiddenGraceMs=60000] how long a hidden page keeps its live connection
 * @param {number} [options.idleTimeoutMs=45000] SSE: no byte for this long is IDLE_TIMEOUT
 * @param {number} [options.connectTimeoutMs=20000] an SSE answer's head, or WELCOME, must come within
 *   this (at most 30 s), else CONNECT_TIMEOUT
 * @param {object} [options.env] stand-ins for fetch, WebSocket, now, random, setTimeout, clearTimeout,
 *   document, window, navigator, location (tests)
 * @returns {RealtimeClient}
 */
export function createClient(options = {}) {
  return new RealtimeClient(options);
}

export { RealtimeClient };
