//! The demo page served at `/`: a browser application of the realtime
//! client module (`/v1/client.js`, served from `web/`). It logs in
//! (`POST /v1/login`: an HttpOnly cookie), then follows one stream twice,
//! over SSE (read with `fetch`) and over WebSocket `realtime.v1`, each
//! with its own client: snapshot, events strictly in sequence, resync on
//! RESET_REQUIRED, full-jitter reconnects ending in DEGRADED (SPEC RT-4,
//! RT-5, RT-7). The page holds no protocol code of its own; what each
//! feed applied and its status are in `window.__dtp`, for people and for
//! the browser tests.
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
<script type="module">
// The page is an application of the client module: it logs in, then
// follows the stream twice, over SSE and over WebSocket, and shows what
// each applied. All protocol work is the module's.
import { createClient } from "/v1/client.js";
const q = new URLSearchParams(location.search);
const token = q.get("token") || "dtp-demo-token";
const stream = q.get("stream") || "demo";
// The values in use, wherever the page shows them (textContent: never markup).
for (const [cls, value] of [["stream", stream], ["token", token], ["host", location.host]]) {
  for (const el of document.getElementsByClassName(cls)) el.textContent = value;
}
// `?attempts=N` lowers the reconnect budget (1-10), never raises it.
const attempts = Math.min(10, Math.max(1, Number(q.get("attempts")) || 10));
const feed = () => ({ seqs: [], opens: 0, resets: 0, gaps: 0, controls: [], last: 0, status: "connecting", attempt: 0, delays: [] });
const D = window.__dtp = { ready: false, sse: feed(), ws: feed() };
function log(which, text) {
  const el = document.getElementById(which + "-log");
  el.textContent = text + "\n" + el.textContent.slice(0, 20000);
}
// A status as the page shows it: the state, or the failure that ended it.
const label = (s) => ({ degraded: "DEGRADED", stopped: s.failure })[s.state] ?? s.state;
function follow(which, transport) {
  const f = D[which];
  const client = createClient({ transport, reconnect: { maxAttempts: attempts } });
  client.subscribe(stream, {
    onSnapshot(state, ctx) {
      f.last = Number(ctx.sequence);
      log(which, "snapshot at #" + ctx.sequence);
    },
    onEvent(event, ctx) {
      f.last = Number(ctx.sequence);
      f.seqs.push(f.last);
      log(which, "#" + ctx.sequence + " " + event.eventType + " " + JSON.stringify(event.payload));
    },
    onControl(c) {
      f.controls.push(c);
      if (c.type === "RESET_REQUIRED") f.resets++;
      log(which, "control " + JSON.stringify(c));
    },
    onStatus(s) {
      f.opens = client.metrics().opens;
      if (s.state === "resyncing" && s.failure === "SEQUENCE_GAP") f.gaps++;
      if (s.state === "reconnecting" && s.delayMs !== undefined) {
        f.attempt = s.attempt;
        f.delays.push(s.delayMs);
      }
      if (s.state === "degraded") log(which, "gave up reconnecting: DEGRADED (reload to try again)");
      f.status = label(s);
      document.getElementById(which + "-state").textContent = f.status;
    },
  });
}
const r = await fetch("/v1/login", { method: "POST", headers: { Authorization: "Bearer " + token } });
if (r.status !== 204) {
  D.sse.status = "login failed " + r.status;
  document.getElementById("sse-state").textContent = D.sse.status;
} else {
  D.ready = true;
  follow("sse", "sse");
  follow("ws", "ws");
}
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

    /// The page uses the client module and holds no protocol code of its
    /// own: no sockets, streams, cursors, jitter or envelope fields.
    #[test]
    fn the_page_uses_the_client_module_and_no_inline_protocol_code() {
        assert!(DEMO_PAGE.contains("<script type=\"module\">"));
        assert!(DEMO_PAGE.contains("import { createClient } from \"/v1/client.js\";"));
        assert!(super::super::web::find("/v1/client.js").is_some());
        for protocol in [
            "new WebSocket",
            "Last-Event-ID",
            "Math.random",
            "TextDecoder",
            "SUBSCRIBE",
            "\"/v1/streams/",
            "resumeCursor",
            "streamEpoch",
            "JSON.parse",
        ] {
            assert!(
                !DEMO_PAGE.contains(protocol),
                "inline protocol code: {protocol}"
            );
        }
    }
}
