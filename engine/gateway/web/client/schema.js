// The exact-key schema step of SPEC RT-4 for everything the browser
// receives: REALTIME_EVENT_V1 envelopes (RT-3), `realtime.v1` server
// messages (RT-9), SSE control events (RT-8), snapshots and their
// checkpoints (RT-6). The rules are the server codec's, so the client
// refuses exactly what the server would never send: identifiers are 1-128
// bytes of [A-Za-z0-9._:-], opaque tokens 1-512 bytes of visible ASCII,
// sequences canonical decimal strings, unknown keys refused before missing
// ones, an unknown protocol or message type is PROTOCOL_MISMATCH and
// anything else MALFORMED_EVENT.
//
// Pure. Every function takes a value `parseStrict` built and returns
// `{ ok: true, value }` or `{ ok: false, failure }`.

import { refuse } from "./json.js";

/** The closed failure vocabulary (SPEC RT-14). */
export const FAILURE_KINDS = Object.freeze([
  "ABORTED", "UNSUPPORTED", "OFFLINE", "CONNECT_TIMEOUT", "IDLE_TIMEOUT", "AUTH_REQUIRED", "FORBIDDEN",
  "RATE_LIMITED", "PROVIDER_UNAVAILABLE", "PROTOCOL_MISMATCH", "MALFORMED_EVENT", "MAPPING_CONTRACT_VIOLATION",
  "EVENT_CONFLICT", "EVENT_TOO_LARGE", "DUPLICATE_EVENT", "STALE_EVENT", "SEQUENCE_GAP", "CURSOR_EXPIRED",
  "QUEUE_OVERFLOW", "APPLY_FAILED", "POLL_BUDGET_EXHAUSTED", "PUSH_PERMISSION_DENIED", "PUSH_SUBSCRIPTION_STALE",
  "NOTIFICATION_REJECTED", "SCOPE_FENCED", "SCOPE_PROTOCOL_VIOLATION", "CLOSED",
]);

/** The closed WebSocket close categories (SPEC RT-9). */
export const CLOSE_CATEGORIES = Object.freeze([
  "NORMAL", "RESTART", "OVERLOADED", "AUTH_REQUIRED", "FORBIDDEN", "PROTOCOL_MISMATCH", "CURSOR_RESET", "NETWORK_LOST",
]);

/** The envelope's `protocol` literal, and the WebSocket subprotocol. */
export const ENVELOPE_PROTOCOL = "REALTIME_EVENT_V1";
export const SUBPROTOCOL = "realtime.v1";

const ID = /^[A-Za-z0-9._:-]{1,128}$/;
const TOKEN = /^[!-~]{1,512}$/;
const DECIMAL = /^(?:0|[1-9][0-9]{0,19})$/;
const U64_MAX = (1n << 64n) - 1n;
const RFC3339 = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.\d{1,9})?(?:Z|[+-](\d{2}):(\d{2}))$/;

/** Whether `s` is an identifier (stream, epoch, event type, event id, subscription id, nonce). */
export const isId = (s) => typeof s === "string" && ID.test(s);
/** Whether `s` is an opaque token (cursor, scope binding, snapshot revision). */
export const isToken = (s) => typeof s === "string" && TOKEN.test(s);

/** A canonical unsigned decimal string as a BigInt, else null. */
export function parseSequence(s) {
  if (typeof s !== "string" || !DECIMAL.test(s)) return null;
  const n = BigInt(s);
  return n <= U64_MAX ? n : null;
}

/** Strict RFC 3339 (uppercase T and Z, 1-9 fraction digits, no leap second). */
export function isRfc3339(s) {
  const m = typeof s === "string" && RFC3339.exec(s);
  if (!m) return false;
  const [y, mo, d, h, mi, se] = m.slice(1, 7).map(Number);
  const days = [31, y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0) ? 29 : 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
  const offsetOk = m[7] === undefined || (Number(m[7]) <= 23 && Number(m[8]) <= 59);
  return mo >= 1 && mo <= 12 && d >= 1 && d <= days[mo - 1] && h <= 23 && mi <= 59 && se <= 59 && offsetOk;
}

const isObject = (v) => typeof v === "object" && v !== null && !Array.isArray(v);

/** The exact-key check: unknown keys first, then missing ones. */
function exact(obj, keys) {
  if (!isObject(obj)) return false;
  for (const k of Object.keys(obj)) if (!keys.includes(k)) return false;
  for (const k of keys) if (!Object.hasOwn(obj, k)) return false;
  return true;
}

const ok = (value) => ({ ok: true, value });
const MALFORMED = refuse("MALFORMED_EVENT");
const MISMATCH = refuse("PROTOCOL_MISMATCH");

const ENVELOPE_KEYS = ["protocol", "streamId", "streamEpoch", "eventType", "eventId", "sequence", "occurredAt",
  "scopeBinding", "payload", "recoveryMode", "resumeCursor"];

/**
 * A REALTIME_EVENT_V1 envelope (SPEC RT-3): the protocol literal first (an
 * unknown or newer one is PROTOCOL_MISMATCH), then the exact key set, then
 * each member. The value returned carries `sequence` as a BigInt in `seq`.
 */
export function envelope(v) {
  if (!isObject(v) || !Object.hasOwn(v, "protocol")) return MALFORMED;
  if (typeof v.protocol !== "string") return MALFORMED;
  if (v.protocol !== ENVELOPE_PROTOCOL) return MISMATCH;
  if (!exact(v, ENVELOPE_KEYS)) return MALFORMED;
  const seq = parseSequence(v.sequence);
  const fine = isId(v.streamId) && isId(v.streamEpoch) && isId(v.eventType) && isId(v.eventId) && seq !== null &&
    isRfc3339(v.occurredAt) && isToken(v.scopeBinding) && isObject(v.payload) && recoveryCursorFits(v.recoveryMode, v.resumeCursor, true);
  return fine ? ok({ ...v, seq }) : MALFORMED;
}

/** CURSOR carries a non-empty token; SNAPSHOT_ONLY (and SESSION_REBUILD for events) exactly null. */
function recoveryCursorFits(mode, cursor, rebuildAllowed) {
  if (mode === "CURSOR") return isToken(cursor);
  if (mode === "SNAPSHOT_ONLY" || (rebuildAllowed && mode === "SESSION_REBUILD")) return cursor === null;
  return false;
}

/**
 * A snapshot checkpoint (SPEC RT-6): `CURSOR` with a cursor or
 * `SNAPSHOT_ONLY` with null; `lastAppliedSequence` as a BigInt in `last`.
 */
export function checkpoint(v) {
  if (!exact(v, ["streamEpoch", "lastAppliedSequence", "snapshotRevision", "recoveryMode", "resumeCursor"])) return MALFORMED;
  const last = parseSequence(v.lastAppliedSequence);
  const fine = isId(v.streamEpoch) && last !== null && isToken(v.snapshotRevision) &&
    recoveryCursorFits(v.recoveryMode, v.resumeCursor, false);
  return fine ? ok({ ...v, last }) : MALFORMED;
}

/**
 * A snapshot answer `{streamId, scopeBinding, checkpoint, state}`. The
 * checkpoint is null for a stream that has had no event yet.
 */
export function snapshot(v, streamId) {
  if (!exact(v, ["streamId", "scopeBinding", "checkpoint", "state"])) return MALFORMED;
  if (v.streamId !== streamId || !isToken(v.scopeBinding)) return MALFORMED;
  if (v.checkpoint === null) return ok({ ...v, checkpoint: null });
  const c = checkpoint(v.checkpoint);
  return c.ok ? ok({ ...v, checkpoint: c.value }) : c;
}

const oneOf = (list) => (s) => typeof s === "string" && list.includes(s);
const isFailure = oneOf(FAILURE_KINDS);
const isCategory = oneOf(CLOSE_CATEGORIES);
const ms = (n) => Number.isSafeInteger(n) && n >= 1 && n <= 3_600_000;
/** The largest CLOSE `retryAfterMs` (SPEC RT-13's largest reconnect delay, 60 s). */
export const MAX_RETRY_AFTER_MS = 60_000;
const retryAfter = (n) => Number.isSafeInteger(n) && n >= 1 && n <= MAX_RETRY_AFTER_MS;
const u32 = (n) => Number.isSafeInteger(n) && n >= 1 && n <= 0xffffffff;

/**
 * A `realtime.v1` message from the server (SPEC RT-9): `type`, then the
 * exact key set of that type (CLOSE may add `retryAfterMs`), then each member. A client-only type
 * (SUBSCRIBE, UNSUBSCRIBE, HEARTBEAT) or an unknown one is PROTOCOL_MISMATCH.
 */
export function serverMessage(v) {
  if (!isObject(v) || typeof v.type !== "string") return MALFORMED;
  const shape = SERVER_MESSAGES[v.type];
  if (!shape) return MISMATCH;
  if (v.type === "WELCOME" && Object.hasOwn(v, "protocol") && v.protocol !== SUBPROTOCOL) return MISMATCH;
  const optional = (shape.optional ?? []).filter((k) => Object.hasOwn(v, k));
  if (!exact(v, ["type", ...shape.keys, ...optional])) return MALFORMED;
  return shape.check(v);
}

const SERVER_MESSAGES = {
  WELCOME: {
    keys: ["protocol", "connectionId", "heartbeat", "limits"],
    check(v) {
      const h = v.heartbeat, l = v.limits;
      const fine = isId(v.connectionId) &&
        exact(h, ["minIntervalMs", "maxIntervalMs", "ackTimeoutMs"]) && ms(h.minIntervalMs) && ms(h.maxIntervalMs) &&
        ms(h.ackTimeoutMs) && h.minIntervalMs <= h.maxIntervalMs &&
        exact(l, ["maxMessageBytes", "maxSubscriptions", "maxQueuedMessages", "maxQueuedBytes"]) &&
        u32(l.maxMessageBytes) && u32(l.maxSubscriptions) && u32(l.maxQueuedMessages) && u32(l.maxQueuedBytes);
      return fine ? ok(v) : MALFORMED;
    },
  },
  SUBSCRIBED: {
    keys: ["subscriptionId", "streamEpoch", "acceptedCursor", "nextExpectedSequence"],
    check(v) {
      const next = parseSequence(v.nextExpectedSequence);
      const fine = isId(v.subscriptionId) && isId(v.streamEpoch) && (v.acceptedCursor === null || isToken(v.acceptedCursor)) &&
        next !== null;
      return fine ? ok({ ...v, next }) : MALFORMED;
    },
  },
  EVENT: {
    keys: ["subscriptionId", "envelope"],
    check(v) {
      if (!isId(v.subscriptionId)) return MALFORMED;
      const e = envelope(v.envelope);
      return e.ok ? ok({ ...v, envelope: e.value }) : e;
    },
  },
  RESET_REQUIRED: {
    keys: ["subscriptionId", "reason"],
    check: (v) => (isId(v.subscriptionId) && isFailure(v.reason) ? ok(v) : MALFORMED),
  },
  UNSUBSCRIBED: { keys: ["subscriptionId"], check: (v) => (isId(v.subscriptionId) ? ok(v) : MALFORMED) },
  HEARTBEAT_ACK: { keys: ["nonce"], check: (v) => (isId(v.nonce) ? ok(v) : MALFORMED) },
  // (ours) `retryAfterMs`: the server's exact not-before hint, 1..60,000 ms;
  // an OVERLOADED close is retried only with it (SPEC RT-7).
  CLOSE: {
    keys: ["category"],
    optional: ["retryAfterMs"],
    check: (v) => (isCategory(v.category) && (!Object.hasOwn(v, "retryAfterMs") || retryAfter(v.retryAfterMs)) ? ok(v) : MALFORMED),
  },
};

/**
 * The `data` of an SSE `event: control` block (SPEC RT-8):
 * RESET_REQUIRED{reason}, GAP{streamEpoch, afterSequence}, CLOSE{category}.
 */
export function sseControl(v) {
  if (!isObject(v) || typeof v.type !== "string") return MALFORMED;
  switch (v.type) {
    case "RESET_REQUIRED":
      return exact(v, ["type", "reason"]) && isFailure(v.reason) ? ok(v) : MALFORMED;
    case "GAP": {
      const after = exact(v, ["type", "streamEpoch", "afterSequence"]) && isId(v.streamEpoch) ? parseSequence(v.afterSequence) : null;
      return after !== null ? ok({ ...v, after }) : MALFORMED;
    }
    case "CLOSE":
      return exact(v, ["type", "category"]) && isCategory(v.category) ? ok(v) : MALFORMED;
    default:
      return MISMATCH;
  }
}
