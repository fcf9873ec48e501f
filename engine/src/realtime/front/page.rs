//! The demo page served at `/`: a browser client of both feeds, written
//! the way the seed's client runtime works (RT-4, RT-5, RT-7). It logs in
//! (`POST /v1/login`: an HttpOnly cookie), takes a snapshot, then follows
//! the stream over SSE (`EventSource`, resuming with `Last-Event-ID`) and
//! over WebSocket `realtime.v1` (resuming with its last cursor), applies
//! events strictly in sequence, and on RESET_REQUIRED resyncs from a new
//! snapshot. Everything it saw is in `window.__dtp`, for people and for
//! the browser tests.

/// The page (`?token=…&stream=…`; defaults: the demo token and stream).
pub(super) const DEMO_PAGE: &str = r##"<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>DTP realtime</title>
<style>body{font:14px system-ui,sans-serif;margin:2em}td{vertical-align:top;padding:0 2em 0 0}
pre{font-size:12px;max-height:60vh;overflow:auto}</style></head>
<body><h1>DTP realtime</h1>
<p>Stream <b id="stream"></b>: publish with
<code>curl -H 'Authorization: Bearer TOKEN' -H 'Content-Type: application/json' -d '{"eventType":"demo.tick","payload":{"n":1}}' http://HOST/v1/streams/STREAM/events</code></p>
<table><tr><td><h2>SSE <span id="sse-state">…</span></h2><pre id="sse-log"></pre></td>
<td><h2>WebSocket <span id="ws-state">…</span></h2><pre id="ws-log"></pre></td></tr></table>
<script>
"use strict";
const q = new URLSearchParams(location.search);
const token = q.get("token") || "dtp-demo-token";
const stream = q.get("stream") || "demo";
document.getElementById("stream").textContent = stream;
const D = window.__dtp = {
  ready: false, scope: null,
  sse: { seqs: [], opens: 0, resets: 0, gaps: 0, controls: [], last: 0, epoch: null },
  ws: { seqs: [], opens: 0, resets: 0, gaps: 0, controls: [], last: 0, epoch: null, cursor: null },
};
function log(which, text) {
  const el = document.getElementById(which + "-log");
  el.textContent = text + "\n" + el.textContent.slice(0, 20000);
}
function state(which, text) { document.getElementById(which + "-state").textContent = text; }
async function snapshot(feed) {
  const r = await fetch("/v1/streams/" + stream + "/snapshot", { cache: "no-store" });
  if (!r.ok) throw new Error("snapshot " + r.status);
  const s = await r.json();
  D.scope = s.scopeBinding;
  feed.epoch = s.checkpoint.streamEpoch;
  feed.last = Number(s.checkpoint.lastAppliedSequence);
  return s.checkpoint;
}
// RT-5: apply only lastApplied + 1; older is stale; newer is a gap.
function apply(which, feed, env) {
  const seq = Number(env.sequence);
  if (feed.epoch !== null && env.streamEpoch !== feed.epoch) { feed.gaps++; return "epoch"; }
  if (seq <= feed.last) return "stale";
  if (seq !== feed.last + 1) { feed.gaps++; log(which, "gap: expected " + (feed.last + 1) + ", got " + seq); return "gap"; }
  feed.last = seq; feed.seqs.push(seq);
  log(which, "#" + seq + " " + env.eventType + " " + JSON.stringify(env.payload));
  return "applied";
}
function startSse(cursor) {
  // First connect from the snapshot's cursor; reconnects send Last-Event-ID.
  const from = cursor ? "?cursor=" + encodeURIComponent(cursor) : "";
  const es = new EventSource("/v1/streams/" + stream + "/sse" + from);
  es.onopen = () => { D.sse.opens++; state("sse", "open"); };
  es.onerror = () => state("sse", es.readyState === 2 ? "closed" : "reconnecting");
  es.onmessage = (m) => {
    const env = JSON.parse(m.data);
    if (apply("sse", D.sse, env) === "gap") snapshot(D.sse);
  };
  es.addEventListener("control", async (m) => {
    const c = JSON.parse(m.data);
    D.sse.controls.push(c);
    log("sse", "control " + m.data);
    if (c.type === "RESET_REQUIRED") { D.sse.resets++; await snapshot(D.sse); }
  });
}
function startWs(attempt) {
  const ws = new WebSocket((location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/v1/ws", "realtime.v1");
  let stable = false;
  ws.onmessage = async (m) => {
    const msg = JSON.parse(m.data);
    if (msg.type === "WELCOME") {
      D.ws.opens++; state("ws", "open"); stable = true;
      ws.send(JSON.stringify({ type: "SUBSCRIBE", subscriptionId: "s1", streamId: stream, cursor: D.ws.cursor, scopeBinding: D.scope }));
    } else if (msg.type === "SUBSCRIBED") {
      D.ws.epoch = msg.streamEpoch;
      if (Number(msg.nextExpectedSequence) !== D.ws.last + 1) { D.ws.gaps++; }
    } else if (msg.type === "EVENT") {
      const r = apply("ws", D.ws, msg.envelope);
      if (r === "applied") D.ws.cursor = msg.envelope.resumeCursor;
    } else if (msg.type === "RESET_REQUIRED") {
      D.ws.resets++; D.ws.controls.push(msg); log("ws", "reset " + msg.reason);
      const cp = await snapshot(D.ws);
      D.ws.cursor = cp.resumeCursor;
      ws.send(JSON.stringify({ type: "SUBSCRIBE", subscriptionId: "s1", streamId: stream, cursor: D.ws.cursor, scopeBinding: D.scope }));
    } else if (msg.type === "CLOSE") {
      D.ws.controls.push(msg); log("ws", "close " + msg.category);
    }
  };
  ws.onclose = () => {
    state("ws", "reconnecting");
    const next = stable ? 0 : Math.min(attempt + 1, 10);
    // RT-7: full jitter, bounded.
    const delay = Math.random() * Math.min(5000, 250 * 2 ** next);
    setTimeout(() => startWs(next), delay);
  };
}
(async () => {
  const r = await fetch("/v1/login", { method: "POST", headers: { Authorization: "Bearer " + token } });
  if (r.status !== 204) { state("sse", "login failed " + r.status); return; }
  const cp = await snapshot(D.sse);
  D.ws.epoch = D.sse.epoch; D.ws.last = D.sse.last; D.ws.cursor = cp.resumeCursor;
  D.ready = true;
  startSse(cp.resumeCursor);
  startWs(0);
})();
</script></body></html>
"##;
