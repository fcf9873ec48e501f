// The exact-key schema step (SPEC RT-3, RT-6, RT-9).
import { test } from "node:test";
import assert from "node:assert/strict";
import { envelope, serverMessage, sseControl, snapshot, checkpoint, isRfc3339 } from "../client/schema.js";
import { env, snap } from "./helpers.mjs";

test("envelopes: protocol first, then exact keys, then members", () => {
  assert.equal(envelope(env()).ok, true);
  assert.equal(envelope(env()).value.seq, 1n);
  assert.equal(envelope(env({ protocol: "REALTIME_EVENT_V2", extra: 1 })).failure, "PROTOCOL_MISMATCH");
  assert.equal(envelope(env({ extra: 1 })).failure, "MALFORMED_EVENT");
  const missing = env();
  delete missing.occurredAt;
  assert.equal(envelope(missing).failure, "MALFORMED_EVENT");
  for (const over of [{ sequence: "01" }, { sequence: 1 }, { sequence: "18446744073709551616" }, { eventId: "a b" },
    { occurredAt: "2026-02-30T00:00:00Z" }, { occurredAt: "2026-01-01t00:00:00z" }, { payload: [1] },
    { recoveryMode: "CURSOR", resumeCursor: null }, { recoveryMode: "SNAPSHOT_ONLY" }, { scopeBinding: "" }]) {
    assert.equal(envelope(env(over)).failure, "MALFORMED_EVENT", JSON.stringify(over));
  }
  assert.equal(envelope(env({ recoveryMode: "SNAPSHOT_ONLY", resumeCursor: null })).ok, true);
  assert.equal(envelope(env({ sequence: "18446744073709551615" })).ok, true);
  assert.equal(isRfc3339("2024-02-29T23:59:59+01:00"), true);
  assert.equal(isRfc3339("2024-02-29T23:59:60Z"), false);
});

test("server messages: closed types and key sets, direction enforced", () => {
  const welcome = { type: "WELCOME", protocol: "realtime.v1", connectionId: "c-1",
    heartbeat: { minIntervalMs: 10000, maxIntervalMs: 30000, ackTimeoutMs: 10000 },
    limits: { maxMessageBytes: 65536, maxSubscriptions: 32, maxQueuedMessages: 128, maxQueuedBytes: 262144 } };
  assert.equal(serverMessage(welcome).ok, true);
  assert.equal(serverMessage({ type: "WELCOME" }).failure, "MALFORMED_EVENT");
  assert.equal(serverMessage({ ...welcome, protocol: "realtime.v2" }).failure, "PROTOCOL_MISMATCH");
  assert.equal(serverMessage({ type: "SUBSCRIBE", subscriptionId: "s1", streamId: "demo", cursor: null, scopeBinding: "x" }).failure,
    "PROTOCOL_MISMATCH");
  assert.equal(serverMessage({ type: "EVENT", subscriptionId: "s1", envelope: env() }).ok, true);
  assert.equal(serverMessage({ type: "EVENT", subscriptionId: "s1", envelope: env({ x: 1 }) }).failure, "MALFORMED_EVENT");
  assert.equal(serverMessage({ type: "RESET_REQUIRED", subscriptionId: "s1", reason: "CURSOR_EXPIRED" }).ok, true);
  assert.equal(serverMessage({ type: "RESET_REQUIRED", subscriptionId: "s1", reason: "because" }).failure, "MALFORMED_EVENT");
  assert.equal(serverMessage({ type: "CLOSE", category: "RESTART" }).ok, true);
  // (ours) an exact retry hint on CLOSE: an integer of 1..60,000 ms, or absent.
  assert.equal(serverMessage({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 750 }).value.retryAfterMs, 750);
  assert.equal(serverMessage({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 60000 }).ok, true);
  for (const bad of [0, 60001, 1.5, "750", null, -1]) {
    assert.equal(serverMessage({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: bad }).failure, "MALFORMED_EVENT", String(bad));
  }
  assert.equal(serverMessage({ type: "CLOSE", category: "OVERLOADED", retryAfter: 750 }).failure, "MALFORMED_EVENT");
  assert.equal(serverMessage({ type: "HEARTBEAT_ACK", nonce: "n", retryAfterMs: 750 }).failure, "MALFORMED_EVENT");
  const sub = serverMessage({ type: "SUBSCRIBED", subscriptionId: "s1", streamEpoch: "e1", acceptedCursor: null, nextExpectedSequence: "5" });
  assert.equal(sub.value.next, 5n);
});

test("SSE controls and snapshots", () => {
  assert.equal(sseControl({ type: "GAP", streamEpoch: "e1", afterSequence: "41" }).value.after, 41n);
  assert.equal(sseControl({ type: "NEW" }).failure, "PROTOCOL_MISMATCH");
  assert.equal(sseControl({ type: "CLOSE", category: "RESTART", why: "x" }).failure, "MALFORMED_EVENT");
  assert.equal(snapshot(snap("3"), "demo").value.checkpoint.last, 3n);
  assert.equal(snapshot(snap("3"), "other").failure, "MALFORMED_EVENT");
  assert.equal(snapshot(snap("0", { checkpoint: null }), "demo").value.checkpoint, null);
  assert.equal(checkpoint({ ...snap("3").checkpoint, recoveryMode: "SESSION_REBUILD", resumeCursor: null }).failure, "MALFORMED_EVENT");
});
