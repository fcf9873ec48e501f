// A WebSocket upgrade refused for its credentials (SPEC RT-7): the browser
// sees only a close 1006, as for a lost network, so the client asks the
// gateway with one snapshot request carrying the page's cookie only. A 401
// is AUTH_REQUIRED: one single-flight recovery through the embedder's
// hook, then one more attempt; without a hook, or when the recovery fails,
// it stops there instead of retrying until its budget is spent.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createClient } from "../client.js";
import { snap, virtualTime, answer } from "./helpers.mjs";

const WELCOME = { type: "WELCOME", protocol: "realtime.v1", connectionId: "c-1",
  heartbeat: { minIntervalMs: 10000, maxIntervalMs: 30000, ackTimeoutMs: 5000 },
  limits: { maxMessageBytes: 65536, maxSubscriptions: 32, maxQueuedMessages: 128, maxQueuedBytes: 262144 } };

/**
 * A client following "demo" over a stand-in WebSocket whose upgrade the
 * gateway refuses while `gw.cookie` is false (a close 1006 before any
 * message), and a stand-in fetch that answers like the gateway: a request
 * with the token is served; one without it (the probe) is 401 unless the
 * cookie is valid; `gw.down` fails every request as a network would.
 */
function setup({ onAuthRequired } = {}) {
  const t = virtualTime();
  const gw = { cookie: true, down: false, probes: [], snapshots: 0 };
  const made = [];
  class FakeWs {
    constructor(url, protocol) {
      this.protocol = protocol;
      this.closed = null;
      made.push(this);
      queueMicrotask(() => {
        if (gw.down || !gw.cookie) {
          this.closed = 1006;
          this.onclose?.({ code: 1006 });
        } else {
          this.onopen?.();
        }
      });
    }
    send() {}
    close(code = 1000) {
      if (this.closed !== null) return;
      this.closed = code;
      queueMicrotask(() => this.onclose?.({ code }));
    }
  }
  const fetch = async (url, init) => {
    if (gw.down) throw new TypeError("network");
    if (init.headers.Authorization === undefined) {
      gw.probes.push({ url, init });
      return answer(gw.cookie ? 200 : 401, { body: JSON.stringify(snap("5")) });
    }
    gw.snapshots++;
    return answer(200, { body: JSON.stringify(snap("5")) });
  };
  const statuses = [];
  const c = createClient({
    transport: "ws", baseUrl: "https://h", headers: () => ({ Authorization: "Bearer t" }),
    env: { fetch, WebSocket: FakeWs, now: t.now, random: () => 0.5, setTimeout: t.setTimeout, clearTimeout: t.clearTimeout,
      document: null, window: null, navigator: null, location: null },
  });
  c.on("status", (s) => statuses.push(s));
  c.subscribe("demo", { onAuthRequired });
  return { t, gw, made, c, statuses };
}

/** The client opened its WebSocket; then the gateway restarts and forgets the cookie. */
async function restarted(opts) {
  const s = setup(opts);
  await s.t.advance(0);
  s.made[0].onmessage({ data: JSON.stringify(WELCOME) });
  await s.t.advance(0);
  assert.equal(s.statuses.at(-1).state, "open");
  s.gw.cookie = false;
  s.made[0].closed = 1006;
  s.made[0].onclose({ code: 1006 });
  return s;
}

test("a refused upgrade without a recovery hook is AUTH_REQUIRED after one probe, never retried", async () => {
  const { t, gw, made, statuses, c } = await restarted();
  await t.advance(600_000);
  const last = statuses.at(-1);
  assert.deepEqual([last.state, last.failure], ["stopped", "AUTH_REQUIRED"]);
  assert.equal(made.length, 2, "the reconnect after the restart, then nothing");
  assert.equal(gw.probes.length, 1, "one probe for the refused attempt (the drop after WELCOME is not probed)");
  assert.equal(c.metrics().degraded, 0);
  const probe = gw.probes.at(-1);
  assert.equal(probe.url, "https://h/v1/streams/demo/snapshot");
  assert.equal(probe.init.credentials, "same-origin");
  assert.deepEqual(Object.keys(probe.init.headers), ["Accept"], "the cookie only, as the WebSocket carries");
});

test("a refused upgrade with a hook: one recovery, then one more attempt that opens", async () => {
  let calls = 0;
  const hook = async () => {
    calls++;
    gw.cookie = true; // the page logged in again
  };
  const s = await restarted({ onAuthRequired: hook });
  const { t, made, statuses } = s;
  const gw = s.gw;
  await t.advance(2_000);
  assert.equal(calls, 1);
  const last = made.at(-1);
  assert.equal(last.closed, null, "the attempt after the recovery is open");
  last.onmessage({ data: JSON.stringify(WELCOME) });
  await t.advance(0);
  assert.equal(statuses.at(-1).state, "open");
  assert.equal(statuses.some((x) => x.state === "stopped"), false);
});

test("a recovery that does not restore the session, or fails, ends in AUTH_REQUIRED after one more attempt", async () => {
  for (const hook of [async () => {}, async () => { throw new Error("login failed"); }]) {
    let calls = 0;
    const { t, made, statuses } = await restarted({ onAuthRequired: () => { calls++; return hook(); } });
    await t.advance(600_000);
    assert.equal(calls, 1, "recovered once");
    const last = statuses.at(-1);
    assert.deepEqual([last.state, last.failure], ["stopped", "AUTH_REQUIRED"]);
    assert.ok(made.length <= 3, `at most one attempt after the recovery (${made.length} sockets)`);
  }
});

test("an upgrade that fails while the gateway is down stays a network failure, retried within the budget", async () => {
  const { t, gw, made, statuses } = setup();
  gw.down = true;
  await t.advance(600_000);
  const last = statuses.at(-1);
  assert.deepEqual([last.state, last.failure], ["degraded", "OFFLINE"]);
  assert.ok(made.length > 1, "retried");
  assert.equal(statuses.some((x) => x.failure === "AUTH_REQUIRED"), false);
});

test("a probe answered other than 401 keeps the close a network failure", async () => {
  const { t, gw, made, statuses } = setup();
  await t.advance(0);
  // The cookie is good, yet the socket drops before WELCOME (a proxy, say).
  made[0].closed = 1006;
  made[0].onclose({ code: 1006 });
  await t.advance(0);
  assert.equal(gw.probes.length, 1);
  const last = statuses.at(-1);
  assert.deepEqual([last.state, last.failure], ["reconnecting", "OFFLINE"]);
});

test("auth recovery is single flight: callers while one runs share it", async () => {
  const { c } = setup();
  let calls = 0;
  let done;
  const hook = () => {
    calls++;
    return new Promise((r) => {
      done = r;
    });
  };
  const a = c.recoverAuth(hook);
  const b = c.recoverAuth(hook);
  await Promise.resolve();
  await Promise.resolve();
  assert.equal(calls, 1);
  done();
  await Promise.all([a, b]);
  const later = c.recoverAuth(hook);
  await Promise.resolve();
  await Promise.resolve();
  assert.equal(calls, 2, "a later failure recovers again");
  done();
  await later;
});
