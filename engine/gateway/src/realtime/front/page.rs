//! The demo page served at `/`: a browser client of both feeds, written
//! the way the seed's client runtime works (RT-4, RT-5, RT-7). It logs in
//! (`POST /v1/login`: an HttpOnly cookie), takes a snapshot, then follows
//! the stream over SSE (read with `fetch`, resuming with `Last-Event-ID`)
//! and over WebSocket `realtime.v1` (resuming with its last cursor),
//! applies events strictly in sequence, and on RESET_REQUIRED resyncs from
//! a new snapshot. Both feeds reconnect as SPEC RT-7 says: full jitter
//! with a budget of 10 attempts or 5 minutes, never sooner than the
//! server's hint, then DEGRADED; never after FORBIDDEN or
//! PROTOCOL_MISMATCH. Everything it saw is in `window.__dtp`, for people
//! and for the browser tests.
//!
//! The page shows the values it uses, not placeholders: the demo token
//! `dtp-demo-token` (the documented loopback-only demo credential; a
//! `?token=` in the page's address replaces it; `?attempts=` lowers the
//! reconnect budget), the stream id and this
//! server's address, in ready-to-paste `curl` lines. Its icon is inline, so
//! a browser asks for no `/favicon.ico` (which is served too, for tabs
//! that open an endpoint directly).

/// The icon, a small SVG (served at `/favicon.ico`; inline in the page).
pub(super) const FAVICON: &str = "<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'>\
<circle cx='8' cy='8' r='7' fill='#2a6'/>\
<path d='M4 8h8M8 4v8' stroke='#fff' stroke-width='2'/></svg>";

/// The page (`?token=…&stream=…`; defaults: the demo token and stream).
pub(super) const DEMO_PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>DTP realtime</title>
<link rel="icon" type="image/svg+xml" href="data:image/svg+xml,%3Csvg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 16 16'%3E%3Ccircle cx='8' cy='8' r='7' fill='%232a6'/%3E%3Cpath d='M4 8h8M8 4v8' stroke='%23fff' stroke-width='2'/%3E%3C/svg%3E">
<style>body{font:14px system-ui,sans-serif;margin:2em}td{vertical-align:top;padding:0 2em 0 0}
pre{font-size:12px;max-height:60vh;overflow:auto}code{white-space:pre-wrap}</style></head>
<body><h1>DTP realtime</h1>
<p>Stream <b class="stream">demo</b>, token <code class="token">dtp-demo-token</code>
(the demo credential, loopback only; <code>?token=…&amp;stream=…</code> picks others). Publish with</p>
<pre><code>curl -H 'Authorization: Bearer <span class="token">dtp-demo-token</span>' -H 'Content-Type: application/json' \
     -d '{"eventType":"demo.tick","payload":{"n":1}}' http://<span class="host">127.0.0.1:7780</span>/v1/streams/<span class="stream">demo</span>/events</code></pre>
<p>and follow it from a shell with</p>
<pre><code>curl -N -H 'Authorization: Bearer <span class="token">dtp-demo-token</span>' http://<span class="host">127.0.0.1:7780</span>/v1/streams/<span class="stream">demo</span>/sse</code></pre>
<table><tr><td><h2>SSE <span id="sse-state">…</span></h2><pre id="sse-log"></pre></td>
<td><h2>WebSocket <span id="ws-state">…</span></h2><pre id="ws-log"></pre></td></tr></table>
<script>
"use strict";
const q = new URLSearchParams(location.search);
const token = q.get("token") || "dtp-demo-token";
const stream = q.get("stream") || "demo";
// The values in use, wherever the page shows them (textContent: never markup).
for (const [cls, value] of [["stream", stream], ["token", token], ["host", location.host]]) {
  for (const el of document.getElementsByClassName(cls)) el.textContent = value;
}
const feed = (extra) => ({ seqs: [], opens: 0, resets: 0, gaps: 0, controls: [], last: 0, epoch: null,
  cursor: null, status: "connecting", attempt: 0, delays: [], ...extra });
const D = window.__dtp = { ready: false, scope: null, sse: feed({}), ws: feed({}) };
function log(which, text) {
  const el = document.getElementById(which + "-log");
  el.textContent = text + "\n" + el.textContent.slice(0, 20000);
}
function state(which, text) { D[which].status = text; document.getElementById(which + "-state").textContent = text; }
async function snapshot(f) {
  const r = await fetch("/v1/streams/" + stream + "/snapshot", { cache: "no-store" });
  if (!r.ok) throw new Error("snapshot " + r.status);
  const s = await r.json();
  D.scope = s.scopeBinding;
  const cp = s.checkpoint || { streamEpoch: null, lastAppliedSequence: "0", resumeCursor: null };
  f.epoch = cp.streamEpoch; f.last = Number(cp.lastAppliedSequence); f.cursor = cp.resumeCursor;
  return cp;
}
// RT-5: apply only lastApplied + 1; older is stale; newer is a gap.
function apply(which, f, env) {
  const seq = Number(env.sequence);
  if (f.epoch !== null && env.streamEpoch !== f.epoch) { f.gaps++; return "epoch"; }
  if (seq <= f.last) return "stale";
  if (seq !== f.last + 1) { f.gaps++; log(which, "gap: expected " + (f.last + 1) + ", got " + seq); return "gap"; }
  f.last = seq; f.seqs.push(seq); f.cursor = env.resumeCursor; f.stable();
  log(which, "#" + seq + " " + env.eventType + " " + JSON.stringify(env.payload));
  return "applied";
}
// RT-7: full-jitter reconnect, delay = random(0, min(max, base * 2^attempt)),
// never sooner than the server's hint; 10 attempts or 5 min from the first
// failure of an outage, then DEGRADED (a delay that would overrun the budget
// is not shortened). The counter restarts only once a connection proved
// itself (an applied event, or 10 s open). FORBIDDEN, PROTOCOL_MISMATCH,
// AUTH_REQUIRED and a terminal close are never retried.
// `?attempts=N` lowers the attempt budget (1-10), never raises it.
const RC = { base: 250, max: 60000, attempts: Math.min(10, Math.max(1, Number(q.get("attempts")) || 10)),
  elapsed: 300000, stable: 10000 };
const FINAL = ["FORBIDDEN", "PROTOCOL_MISMATCH", "AUTH_REQUIRED", "NORMAL"];
function reconnecting(which, start) {
  const f = D[which];
  let since = null, timer = null;
  f.stable = () => { f.attempt = 0; since = null; clearTimeout(timer); };
  f.opened = () => { f.opens++; state(which, "open"); timer = setTimeout(f.stable, RC.stable); };
  // `why`: a close category (or NETWORK_LOST); `hint`: the server's not-before, ms.
  f.failed = (why, hint) => {
    clearTimeout(timer);
    if (FINAL.includes(why)) { state(which, why === "NORMAL" ? "closed" : why); return; }
    const now = Date.now();
    since ??= now;
    const local = Math.random() * Math.min(RC.max, RC.base * 2 ** f.attempt);
    const delay = Math.max(local, hint ?? 0);
    // OVERLOADED is retried only with a hint (seed §5.3).
    if (f.attempt >= RC.attempts || now - since + delay > RC.elapsed || (hint ?? 0) > RC.max ||
        (why === "OVERLOADED" && hint == null)) {
      state(which, "DEGRADED"); log(which, "gave up reconnecting: DEGRADED (reload to try again)"); return;
    }
    f.attempt++; f.delays.push(Math.round(delay));
    state(which, "reconnecting");
    setTimeout(start, delay);
  };
}
// SSE over fetch (an EventSource cannot jitter its reconnects): the first
// connect names the snapshot's cursor; a reconnect sends Last-Event-ID.
const SSE_STATUS = { 204: "NORMAL", 401: "AUTH_REQUIRED", 403: "FORBIDDEN", 409: "CURSOR_RESET", 410: "CURSOR_RESET",
  429: "OVERLOADED", 502: "NETWORK_LOST", 503: "NETWORK_LOST", 504: "NETWORK_LOST" };
async function startSse() {
  const f = D.sse;
  const first = f.opens === 0;
  const from = first && f.cursor ? "?cursor=" + encodeURIComponent(f.cursor) : "";
  const headers = !first && f.cursor ? { "Last-Event-ID": f.cursor } : {};
  let why = "NETWORK_LOST", hint = null;
  try {
    const r = await fetch("/v1/streams/" + stream + "/sse" + from, { headers, cache: "no-store" });
    const after = Number(r.headers.get("Retry-After"));
    if (after > 0) hint = after * 1000;
    if (r.status !== 200) {
      why = SSE_STATUS[r.status] ?? "PROTOCOL_MISMATCH";
      if (r.status === 503 && hint !== null) why = "OVERLOADED";
      return;
    }
    if (!(r.headers.get("Content-Type") || "").startsWith("text/event-stream")) { why = "PROTOCOL_MISMATCH"; return; }
    f.opened();
    const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "", data = [], event = "message";
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += value;
      const lines = buf.split(/\r\n|\r(?!$)|\n/); // a CR last may pair with an LF to come
      buf = lines.pop();
      for (const line of lines) {
        if (line === "") {
          if (data.length) {
            const w = await sseBlock(event, data.join("\n"));
            if (w) why = w;
            if (FINAL.includes(w)) { reader.cancel(); return; }
          }
          data = []; event = "message";
          continue;
        }
        const c = line.indexOf(":");
        if (c === 0) continue; // a heartbeat comment
        const name = c < 0 ? line : line.slice(0, c);
        const v = c < 0 ? "" : line.slice(c + 1).replace(/^ /, "");
        if (name === "data") data.push(v);
        else if (name === "event") event = v;
        else if (name === "retry" && /^\d+$/.test(v)) hint = Number(v); // a not-before bound
      }
    }
  } catch (e) {
    // a network error: retried
  } finally {
    f.failed(why, hint);
  }
}
// One SSE block; returns the category of a CLOSE, or of a reset that ends
// the feed for good.
async function sseBlock(event, data) {
  const f = D.sse;
  if (event === "message") {
    if (apply("sse", f, JSON.parse(data)) === "gap") await snapshot(f);
    return null;
  }
  if (event !== "control") return null;
  const c = JSON.parse(data);
  f.controls.push(c);
  log("sse", "control " + data);
  if (c.type === "CLOSE") return c.category;
  if (c.type === "RESET_REQUIRED") {
    if (FINAL.includes(c.reason)) return c.reason;
    f.resets++; await snapshot(f);
  }
  return null;
}
function startWs() {
  const f = D.ws;
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/ws", "realtime.v1");
  let why = null;
  const subscribe = () => ws.send(JSON.stringify({ type: "SUBSCRIBE", subscriptionId: "s1", streamId: stream, cursor: f.cursor, scopeBinding: D.scope }));
  ws.onopen = () => { if (ws.protocol !== "realtime.v1") { why = "PROTOCOL_MISMATCH"; ws.close(); } };
  ws.onmessage = async (m) => {
    const msg = JSON.parse(m.data);
    if (msg.type === "WELCOME") {
      f.opened();
      subscribe();
    } else if (msg.type === "SUBSCRIBED") {
      f.epoch = msg.streamEpoch;
      if (Number(msg.nextExpectedSequence) !== f.last + 1) { f.gaps++; }
    } else if (msg.type === "EVENT") {
      apply("ws", f, msg.envelope);
    } else if (msg.type === "RESET_REQUIRED") {
      f.controls.push(msg); log("ws", "reset " + msg.reason);
      if (FINAL.includes(msg.reason)) { why = msg.reason; ws.close(); return; }
      f.resets++;
      await snapshot(f);
      subscribe();
    } else if (msg.type === "CLOSE") {
      f.controls.push(msg); log("ws", "close " + msg.category);
      why = msg.category;
    }
  };
  // Close codes of seed §7.4 when no CLOSE message said why.
  const CODES = { 1000: "NORMAL", 1002: "PROTOCOL_MISMATCH", 1003: "PROTOCOL_MISMATCH", 1007: "PROTOCOL_MISMATCH",
    1008: "FORBIDDEN", 1009: "PROTOCOL_MISMATCH", 1010: "PROTOCOL_MISMATCH", 1013: "OVERLOADED", 4401: "AUTH_REQUIRED",
    4403: "FORBIDDEN", 4409: "CURSOR_RESET" };
  ws.onclose = (e) => f.failed(why ?? CODES[e.code] ?? "NETWORK_LOST", null);
}
reconnecting("sse", startSse);
reconnecting("ws", startWs);
(async () => {
  const r = await fetch("/v1/login", { method: "POST", headers: { Authorization: "Bearer " + token } });
  if (r.status !== 204) { state("sse", "login failed " + r.status); return; }
  const cp = await snapshot(D.sse);
  D.ws.epoch = D.sse.epoch; D.ws.last = D.sse.last; D.ws.cursor = cp.resumeCursor;
  D.ready = true;
  startSse();
  startWs();
})();
</script></body></html>
"##;

#[cfg(test)]
mod tests {
    use super::{DEMO_PAGE, FAVICON};

    /// The demo credential the page uses unless its address names another.
    const DEMO_TOKEN: &str = "dtp-demo-token";

    #[test]
    fn the_page_shows_the_demo_values_and_declares_its_icon_inline() {
        assert!(DEMO_PAGE.contains(&format!("Bearer <span class=\"token\">{DEMO_TOKEN}</span>")));
        assert!(DEMO_PAGE.contains("/v1/streams/<span class=\"stream\">demo</span>/events"));
        assert!(!DEMO_PAGE.contains("TOKEN") && !DEMO_PAGE.contains("STREAM"));
        // The inline icon is the served one, percent-encoded.
        let encoded = FAVICON
            .replace('%', "%25")
            .replace('<', "%3C")
            .replace('>', "%3E")
            .replace('#', "%23");
        let link = format!(
            "<link rel=\"icon\" type=\"image/svg+xml\" href=\"data:image/svg+xml,{encoded}\">"
        );
        assert!(DEMO_PAGE.contains(&link), "{link}");
    }
}
