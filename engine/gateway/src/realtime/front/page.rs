//! The demo page served at `/`: a browser client of both feeds, written
//! the way the seed's client runtime works (RT-4, RT-5, RT-7). It logs in
//! (`POST /v1/login`: an HttpOnly cookie), takes a snapshot, then follows
//! the stream over SSE (`EventSource`, resuming with `Last-Event-ID`) and
//! over WebSocket `realtime.v1` (resuming with its last cursor), applies
//! events strictly in sequence, and on RESET_REQUIRED resyncs from a new
//! snapshot. Everything it saw is in `window.__dtp`, for people and for
//! the browser tests.
//!
//! The page shows the values it uses, not placeholders: the demo token
//! `dtp-demo-token` (the documented loopback-only demo credential; a
//! `?token=` in the page's address replaces it), the stream id and this
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
