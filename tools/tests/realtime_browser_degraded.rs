//! The demo page's reconnect rules in a real browser (SPEC RT-7): a feed
//! refused with FORBIDDEN or PROTOCOL_MISMATCH never retries; and with the
//! page open on both feeds, the server goes away: each feed reconnects
//! with full jitter (SSE never sooner than the stream's `retry:` hint),
//! then shows DEGRADED once its attempts are spent and makes no further
//! attempt. Runs Debian's headless chromium through playwright-core, as
//! `realtime_browser` does.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod external;

use std::process::Command;
use std::time::Duration;

use external::{install_browser, root, serve, spawn_lines};

/// The driver. First, with the server up, two pages whose feeds are
/// answered by stand-ins (playwright routes): SSE 403 and a WebSocket
/// CLOSE PROTOCOL_MISMATCH, then SSE 200 with the wrong content type and a
/// WebSocket CLOSE FORBIDDEN; neither feed may retry. Then a page with a
/// budget of two attempts; READY once both its feeds are open; the test
/// kills the server; both must show DEGRADED and then stay quiet. One JSON
/// line at the end.
const DRIVER: &str = r#"
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium } from "playwright-core";
const origin = process.argv[1];
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const dir = mkdtempSync(join(tmpdir(), "dtp-chromium-"));
const out = { ok: false, refused: [] };
const slim = (f) => f && { status: f.status, opens: f.opens, attempt: f.attempt, delays: f.delays };
const context = await chromium.launchPersistentContext(dir, {
  executablePath: "/usr/bin/chromium", headless: true, timeout: 20000,
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking"],
});
const until = async (page, pred) => {
  for (let i = 0; i < 400; i++) {
    const v = await page.evaluate(() => window.__dtp);
    if (pred(v)) return v;
    await sleep(50);
  }
  return null;
};
try {
  for (const [sseAnswer, category, code] of [[{ status: 403, body: "" }, "PROTOCOL_MISMATCH", 1002],
    [{ status: 200, contentType: "text/plain", body: "no" }, "FORBIDDEN", 4403]]) {
    const page = await context.newPage();
    const seen = { sse: 0, ws: 0 };
    await page.route("**/sse*", (r) => { seen.sse++; r.fulfill(sseAnswer); });
    await page.routeWebSocket("**/v1/ws", (ws) => {
      seen.ws++;
      ws.send(JSON.stringify({ type: "WELCOME", protocol: "realtime.v1", connectionId: "stand-in",
        heartbeat: { minIntervalMs: 10000, maxIntervalMs: 30000, ackTimeoutMs: 10000 },
        limits: { maxMessageBytes: 65536, maxSubscriptions: 32, maxQueuedMessages: 128, maxQueuedBytes: 262144 } }));
      ws.onMessage(() => { ws.send(JSON.stringify({ type: "CLOSE", category })); ws.close({ code }); });
    });
    await page.goto(origin + "/");
    const v = await until(page, (v) => v && v.sse.status !== "connecting" && v.sse.status !== "reconnecting" &&
      v.ws.status !== "connecting" && v.ws.status !== "open" && v.ws.status !== "reconnecting");
    await sleep(1500);
    out.refused.push({ sse: slim(v?.sse), ws: slim(v?.ws), seen });
    await page.close();
  }
  const page = await context.newPage();
  let sse = 0, ws = 0;
  page.on("request", (r) => { if (r.url().includes("/sse")) sse++; });
  page.on("websocket", () => ws++);
  await page.goto(origin + "/?attempts=2");
  if (await until(page, (v) => v.ready && v.sse.opens >= 1 && v.ws.opens >= 1)) {
    console.log("READY");
    const v = await until(page, (v) => v.sse.status === "DEGRADED" && v.ws.status === "DEGRADED");
    const seen = { sse, ws };
    await sleep(1500);
    Object.assign(out, { ok: v !== null, sse: slim(v?.sse), ws: slim(v?.ws), seen, later: { sse, ws } });
  }
} finally {
  await context.close().catch(() => {});
  rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify(out));
"#;

#[test]
fn the_demo_page_never_retries_a_refusal_and_degrades_when_its_budget_is_spent() {
    install_browser();
    let server = serve(&[]);
    let origin = server.base.trim_end_matches("/v1").to_owned();
    let (mut node, rx) = spawn_lines(
        Command::new("node")
            .args(["--input-type=module", "-e", DRIVER, &origin])
            .current_dir(root().join("tests/browser")),
    );
    let wait = Duration::from_secs(60);
    let line = rx.recv_timeout(wait).unwrap_or_default();
    if line != "READY" {
        let _ = node.kill();
        panic!("the page did not open both feeds: {line}");
    }
    drop(server); // killed: every reconnect is refused
    let summary = rx.recv_timeout(wait).unwrap_or_default();
    let _ = node.kill();
    let _ = node.wait();
    println!("{summary}");
    let v: serde_json::Value = serde_json::from_str(&summary).expect("a JSON summary");
    assert_eq!(v["ok"], true, "both feeds DEGRADED: {v:#}");
    for feed in ["sse", "ws"] {
        let delays = v[feed]["delays"].as_array().unwrap();
        assert_eq!(
            delays.len(),
            2,
            "{feed}: two reconnects, then DEGRADED: {v:#}"
        );
        // No attempt after DEGRADED.
        assert_eq!(v["seen"][feed], v["later"][feed], "{feed}: {v:#}");
    }
    // The stream's `retry:` (2 s) bounds the first SSE reconnect from below.
    assert!(v["sse"]["delays"][0].as_u64().unwrap() >= 2000, "{v:#}");
    // FORBIDDEN and PROTOCOL_MISMATCH: one attempt each, no retry.
    let refused = v["refused"].as_array().unwrap();
    let expect = [
        ("FORBIDDEN", "PROTOCOL_MISMATCH"),
        ("PROTOCOL_MISMATCH", "FORBIDDEN"),
    ];
    assert_eq!(refused.len(), 2, "{v:#}");
    for (r, (sse, ws)) in refused.iter().zip(expect) {
        assert_eq!(r["sse"]["status"], sse, "{r:#}");
        assert_eq!(r["ws"]["status"], ws, "{r:#}");
        assert_eq!(r["seen"]["sse"], 1, "SSE asked once: {r:#}");
        assert_eq!(r["seen"]["ws"], 1, "WebSocket opened once: {r:#}");
        assert_eq!(r["sse"]["delays"], serde_json::json!([]), "{r:#}");
        assert_eq!(r["ws"]["delays"], serde_json::json!([]), "{r:#}");
    }
}
