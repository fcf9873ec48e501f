// The `realtime.v1` transport of the window runtime, against a stand-in
// WebSocket (SPEC RT-9): subscribe from the snapshot's checkpoint, apply
// in order, recover on RESET_REQUIRED, heartbeats, and the close
// categories that must not be retried.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../client.js";
import { env, snap, virtualTime, answer } from "./helpers.mjs";

const WELCOME = { type: "WELCOME", protocol: "realtime.v1", connectionId: "c-1",
  heartbeat: { minIntervalMs: 10000, maxIntervalMs: 30000, ackTimeoutMs: 5000 },
  limits: { maxMessageBytes: 65536, maxSubscriptions: 32, maxQueuedMessages: 128, maxQueuedBytes: 262144 } };

/** A stand-in WebSocket class recording every socket it made. */
function fakeSockets() {
  const made = [];
  class FakeWs {
    constructor(url, protocol) {
      this.url = url;
      this.protocol = protocol;
      this.sent = [];
      this.bufferedAmount = 0;
      this.closed = null;
      made.push(this);
      queueMicrotask(() => this.onopen?.());
    }
    send(text) {
      this.sent.push(JSON.parse(text));
    }
    close(code = 1000) {
      if (this.closed !== null) return;
      this.closed = code;
      queueMicrotask(() => this.onclose?.({ code }));
    }
    /** The server side. */
    deliver(msg) {
      this.onmessage?.({ data: typeof msg === "string" || msg instanceof ArrayBuffer ? msg : JSON.stringify(msg) });
    }
    drop(code) {
      this.closed = code;
      this.onclose?.({ code });
    }
  }
  return { FakeWs, made };
}

function setup(snapshots = ["5"]) {
  const t = virtualTime();
  const { FakeWs, made } = fakeSockets();
  let n = 0;
  const fetch = async (url) => {
    const streamId = url.split("/").at(-2);
    return answer(200, { body: JSON.stringify(snap(snapshots[Math.min(n++, snapshots.length - 1)], { streamId })) });
  };
  const statuses = [];
  const c = createClient({
    transport: "ws", baseUrl: "https://h",
    env: { fetch, WebSocket: FakeWs, now: t.now, random: () => 0.5, setTimeout: t.setTimeout, clearTimeout: t.clearTimeout,
      document: null, window: null, navigator: null, location: null },
  });
  c.on("status", (s) => statuses.push(s));
  const applied = [];
  c.subscribe("demo", { onEvent: (e, ctx) => applied.push(ctx.sequence) });
  return { t, made, c, statuses, applied, snaps: () => n, FakeWs };
}

const event = (id, s, over = {}) => ({ type: "EVENT", subscriptionId: id, envelope: env({ sequence: String(s), ...over }) });

test("subscribes from the checkpoint, applies in order, resubscribes after RESET_REQUIRED", async () => {
  const { t, made, applied, snaps } = setup(["5", "9"]);
  await t.advance(0);
  const ws = made[0];
  assert.equal(ws.url, "wss://h/v1/ws");
  assert.equal(ws.protocol, "realtime.v1");
  ws.deliver(WELCOME);
  await t.advance(0);
  assert.deepEqual(ws.sent[0], { type: "SUBSCRIBE", subscriptionId: "s1", streamId: "demo", cursor: "c1.5", scopeBinding: "scope-1" });
  ws.deliver({ type: "SUBSCRIBED", subscriptionId: "s1", streamEpoch: "e1", acceptedCursor: "c1.5", nextExpectedSequence: "6" });
  for (const s of [6, 7, 7, 5]) ws.deliver(event("s1", s));
  await t.advance(0);
  assert.deepEqual(applied, ["6", "7"]);
  ws.deliver({ type: "RESET_REQUIRED", subscriptionId: "s1", reason: "CURSOR_EXPIRED" });
  ws.deliver(event("s1", 8)); // late, for the forgotten subscription: a protocol failure if applied
  await t.advance(0);
  assert.equal(snaps(), 2);
  const again = ws.sent.at(-1);
  assert.equal(again.type, "SUBSCRIBE");
  assert.equal(again.cursor, "c1.9");
  assert.notEqual(again.subscriptionId, "s1");
  assert.equal(ws.closed, null, "the late event was dropped, the connection kept");
  assert.deepEqual(applied, ["6", "7"]);
});

test("a SUBSCRIBED that would skip events is not accepted silently", async () => {
  const { t, made, c } = setup(["5", "5"]);
  await t.advance(0);
  const ws = made[0];
  ws.deliver(WELCOME);
  await t.advance(0);
  ws.deliver({ type: "SUBSCRIBED", subscriptionId: "s1", streamEpoch: "e1", acceptedCursor: null, nextExpectedSequence: "8" });
  await t.advance(0);
  assert.equal(c.metrics().resyncs, 1);
  assert.deepEqual(ws.sent.slice(1, 3).map((m) => m.type), ["UNSUBSCRIBE", "SUBSCRIBE"]);
  // The tombstoned id's late messages are dropped; its UNSUBSCRIBED is expected.
  ws.deliver(event("s1", 6));
  ws.deliver({ type: "UNSUBSCRIBED", subscriptionId: "s1" });
  await t.advance(0);
  assert.equal(ws.closed, null, "still open");
});

for (const [how, category, code] of [["CLOSE FORBIDDEN", "FORBIDDEN", 4403], ["CLOSE PROTOCOL_MISMATCH", "PROTOCOL_MISMATCH", 1002]]) {
  test(`${how} is never retried`, async () => {
    const { t, made, statuses } = setup();
    await t.advance(0);
    made[0].deliver(WELCOME);
    await t.advance(0);
    made[0].deliver({ type: "CLOSE", category });
    made[0].drop(code);
    await t.advance(600_000);
    assert.equal(made.length, 1);
    assert.equal(statuses.at(-1).state, "stopped");
    assert.equal(statuses.at(-1).failure, category);
  });
}

test("binary frames, unknown messages and malformed JSON end the connection as protocol failures", async () => {
  for (const bad of [new ArrayBuffer(4), { type: "HELLO" }, '{"type":"CLOSE","category":"NORMAL","x":1}']) {
    const { t, made, statuses } = setup();
    await t.advance(0);
    made[0].deliver(WELCOME);
    await t.advance(0);
    made[0].deliver(bad);
    await t.advance(600_000);
    assert.equal(made.length, 1, "not retried");
    assert.equal(["PROTOCOL_MISMATCH", "MALFORMED_EVENT"].includes(statuses.at(-1).failure), true, JSON.stringify(statuses.at(-1)));
  }
});

test("one outstanding heartbeat; a missing ack closes and reconnects", async () => {
  const { t, made, statuses } = setup();
  await t.advance(0);
  made[0].deliver(WELCOME);
  await t.advance(15_000);
  const beats = made[0].sent.filter((m) => m.type === "HEARTBEAT");
  assert.equal(beats.length, 1);
  made[0].deliver({ type: "HEARTBEAT_ACK", nonce: beats[0].nonce });
  await t.advance(15_000);
  assert.equal(made[0].sent.filter((m) => m.type === "HEARTBEAT").length, 2);
  await t.advance(5_000); // no ack
  assert.equal(made[0].closed, 1000);
  assert.equal(statuses.some((s) => s.state === "reconnecting" && s.failure === "IDLE_TIMEOUT"), true);
  await t.advance(1_000);
  assert.equal(made.length, 2, "reconnected");
});

test("one connection carries several subscriptions; one that joins later gets its snapshot first", async () => {
  const { t, made, c, snaps } = setup(["5"]);
  await t.advance(0);
  made[0].deliver(WELCOME);
  await t.advance(0);
  const other = [];
  const stop = c.subscribe("other", { onEvent: (e, ctx) => other.push(ctx.sequence) });
  await t.advance(0);
  assert.equal(made.length, 1, "the same connection");
  assert.equal(snaps(), 2);
  const sub = made[0].sent.at(-1);
  assert.deepEqual([sub.type, sub.streamId, sub.cursor], ["SUBSCRIBE", "other", "c1.5"]);
  made[0].deliver({ type: "SUBSCRIBED", subscriptionId: sub.subscriptionId, streamEpoch: "e1", acceptedCursor: null, nextExpectedSequence: "6" });
  made[0].deliver(event(sub.subscriptionId, 6, { streamId: "other" }));
  await t.advance(0);
  assert.deepEqual(other, ["6"]);
  stop();
  await t.advance(0);
  assert.deepEqual(made[0].sent.at(-1), { type: "UNSUBSCRIBE", subscriptionId: sub.subscriptionId });
  // A reconnect subscribes what is left, from its cursor.
  made[0].deliver({ type: "CLOSE", category: "RESTART" });
  made[0].drop(1012);
  await t.advance(1_000);
  assert.equal(made.length, 2);
  made[1].deliver(WELCOME);
  await t.advance(0);
  assert.deepEqual(made[1].sent.map((m) => [m.type, m.streamId, m.cursor]), [["SUBSCRIBE", "demo", "c1.5"]]);
});

test("an apply queue past its ceiling closes the connection and recovers from a snapshot, never dropping events silently", async () => {
  const t = virtualTime();
  const { FakeWs, made } = fakeSockets();
  let snaps = 0;
  const fetch = async () => {
    snaps++;
    return answer(200, { body: JSON.stringify(snap("5")) });
  };
  let release;
  const slow = new Promise((r) => { release = r; });
  const statuses = [];
  const c = createClient({
    transport: "ws", baseUrl: "https://h", queue: { maxEvents: 4 },
    env: { fetch, WebSocket: FakeWs, now: t.now, random: () => 0.5, setTimeout: t.setTimeout, clearTimeout: t.clearTimeout,
      document: null, window: null, navigator: null, location: null },
  });
  c.on("status", (s) => statuses.push(s));
  const applied = [];
  c.subscribe("demo", { onEvent: async (e, ctx) => { applied.push(ctx.sequence); await slow; } });
  await t.advance(0);
  made[0].deliver(WELCOME);
  await t.advance(0);
  made[0].deliver({ type: "SUBSCRIBED", subscriptionId: "s1", streamEpoch: "e1", acceptedCursor: null, nextExpectedSequence: "6" });
  await t.advance(0);
  for (let s = 6; s <= 12; s++) made[0].deliver(event("s1", s));
  await t.advance(0);
  assert.equal(made[0].closed, 1000);
  assert.equal(c.metrics().overflows, 1);
  assert.equal(statuses.some((s) => s.failure === "QUEUE_OVERFLOW" && s.state === "reconnecting"), true);
  release();
  await t.advance(1_000);
  assert.deepEqual(applied, ["6"], "nothing after the overflow was applied");
  assert.equal(made.length, 2, "reconnected");
  assert.equal(snaps, 2, "from a new snapshot");
});

/** A client on `setup`'s stand-ins, its WebSocket open and subscribed at 5 (events 6 and 7 applied). */
async function following(policy) {
  const t = virtualTime();
  const { FakeWs, made } = fakeSockets();
  const asked = [];
  const fetch = async (url) => {
    asked.push(url);
    return answer(200, { body: JSON.stringify(snap("5")) });
  };
  const statuses = [];
  const controls = [];
  const c = createClient({
    transport: "ws", baseUrl: "https://h", reconnect: policy,
    env: { fetch, WebSocket: FakeWs, now: t.now, random: () => 0, setTimeout: t.setTimeout, clearTimeout: t.clearTimeout,
      document: null, window: null, navigator: null, location: null },
  });
  c.on("status", (s) => statuses.push(s));
  c.on("control", (k) => controls.push(k));
  const applied = [];
  const gate = { hold: null }; // a promise the effect waits for, if set
  c.subscribe("demo", { onEvent: async (e, ctx) => { applied.push(ctx.sequence); await gate.hold; } });
  await t.advance(0);
  made[0].deliver(WELCOME);
  await t.advance(0);
  made[0].deliver({ type: "SUBSCRIBED", subscriptionId: "s1", streamEpoch: "e1", acceptedCursor: "c1.5", nextExpectedSequence: "6" });
  made[0].deliver(event("s1", 6));
  made[0].deliver(event("s1", 7));
  await t.advance(0);
  assert.deepEqual(applied, ["6", "7"]);
  return { t, made, c, statuses, controls, applied, gate, snaps: () => asked.length };
}

test("CLOSE OVERLOADED with a hint: retried no sooner than the hint, resumed from the last commit, no gap, no duplicate", async () => {
  const { t, made, c, statuses, controls, applied, snaps } = await following();
  made[0].deliver({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 1500 });
  made[0].drop(1013);
  await t.advance(0);
  assert.deepEqual(controls.at(-1), { stream: "demo", type: "CLOSE", category: "OVERLOADED", retryAfterMs: 1500 });
  const r = statuses.at(-1);
  assert.deepEqual([r.state, r.failure, r.delayMs], ["reconnecting", "RATE_LIMITED", 1500], "random 0: the hint is the delay");
  await t.advance(1499);
  assert.equal(made.length, 1, "not before the hint");
  await t.advance(1);
  assert.equal(made.length, 2, "reconnected at the hint");
  made[1].deliver(WELCOME);
  await t.advance(0);
  assert.equal(snaps(), 1, "no snapshot: the cursor resumes");
  assert.deepEqual(made[1].sent[0], { type: "SUBSCRIBE", subscriptionId: "s1", streamId: "demo", cursor: "c1.7", scopeBinding: "scope-1" });
  made[1].deliver({ type: "SUBSCRIBED", subscriptionId: "s1", streamEpoch: "e1", acceptedCursor: "c1.7", nextExpectedSequence: "8" });
  for (const s of [7, 8, 9]) made[1].deliver(event("s1", s));
  await t.advance(0);
  assert.deepEqual(applied, ["6", "7", "8", "9"]);
  assert.equal(c.metrics().duplicate + c.metrics().stale, 1, "the replayed 7 was dropped");
  assert.equal(c.metrics().dedupeIds, 4, "6 to 9 in the dedupe window");
  assert.equal(statuses.at(-1).state, "open");
  assert.equal(c.metrics().degraded, 0);
});

test("CLOSE OVERLOADED with a hint whose cursor is gone: a snapshot, then the events after it", async () => {
  const { t, made, applied, snaps } = await following();
  made[0].deliver({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 500 });
  made[0].drop(1013);
  await t.advance(500);
  made[1].deliver(WELCOME);
  await t.advance(0);
  made[1].deliver({ type: "RESET_REQUIRED", subscriptionId: "s1", reason: "CURSOR_EXPIRED" });
  await t.advance(0);
  assert.equal(snaps(), 2, "recovered from a snapshot");
  const again = made[1].sent.at(-1);
  assert.deepEqual([again.type, again.cursor], ["SUBSCRIBE", "c1.5"]);
  made[1].deliver({ type: "SUBSCRIBED", subscriptionId: again.subscriptionId, streamEpoch: "e1", acceptedCursor: "c1.5", nextExpectedSequence: "6" });
  await t.advance(0);
  assert.deepEqual(applied, ["6", "7"], "nothing applied twice");
});

test("the CLOSE still waiting behind events when the socket closes gives its hint; the events behind the commit are not applied", async () => {
  const { t, made, statuses, applied, gate } = await following();
  let release;
  gate.hold = new Promise((r) => { release = r; });
  made[0].deliver(event("s1", 8));
  await t.advance(0); // 8's effect is under way
  for (const s of [9, 10]) made[0].deliver(event("s1", s));
  made[0].deliver({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 800 });
  made[0].drop(1013);
  await t.advance(0);
  const r = statuses.at(-1);
  assert.deepEqual([r.state, r.failure, r.delayMs], ["reconnecting", "RATE_LIMITED", 800]);
  release();
  await t.advance(800);
  assert.deepEqual(applied, ["6", "7", "8"], "9 and 10 were dropped with the generation");
  assert.equal(made.length, 2);
  made[1].deliver(WELCOME);
  await t.advance(0);
  assert.equal(made[1].sent[0].cursor, "c1.8", "resumed after 8, the last commit");
});

test("CLOSE OVERLOADED without a hint is terminal: DEGRADED, no reconnect", async () => {
  const { t, made, c, statuses } = await following();
  made[0].deliver({ type: "CLOSE", category: "OVERLOADED" });
  made[0].drop(1013);
  await t.advance(600_000);
  assert.equal(made.length, 1);
  const r = statuses.at(-1);
  assert.deepEqual([r.state, r.failure, r.degraded], ["degraded", "RATE_LIMITED", "HINT_MISSING"]);
  assert.equal(c.metrics().degraded, 1);
});

test("OVERLOADED hints stay within the reconnect budgets", async () => {
  // A hint above the largest delay is the budget spent.
  const above = await following({ maxDelayMs: 1000 });
  above.made[0].deliver({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 1001 });
  above.made[0].drop(1013);
  await above.t.advance(600_000);
  assert.equal(above.made.length, 1);
  assert.deepEqual([above.statuses.at(-1).state, above.statuses.at(-1).degraded], ["degraded", "HINT_ABOVE_MAX_DELAY"]);
  // Closed again and again before any event applies: at most maxAttempts retries.
  const { t, made, statuses } = await following({ maxAttempts: 3 });
  for (let i = 0; i < 10 && statuses.at(-1).state !== "degraded"; i++) {
    const ws = made.at(-1);
    if (i > 0) ws.deliver(WELCOME);
    await t.advance(0);
    ws.deliver({ type: "CLOSE", category: "OVERLOADED", retryAfterMs: 100 });
    ws.drop(1013);
    await t.advance(100);
  }
  assert.equal(made.length, 4, "the first connection and three retries");
  assert.deepEqual([statuses.at(-1).state, statuses.at(-1).degraded], ["degraded", "ATTEMPTS_EXHAUSTED"]);
});
