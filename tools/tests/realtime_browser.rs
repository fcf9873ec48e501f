//! The realtime demo page in a real browser (SPEC RT-5, RT-7, RT-8, RT-9):
//! `dtp serve` runs, and `tests/browser/realtime.mjs` drives its page in
//! Debian's headless chromium through playwright-core: both feeds (SSE and
//! WebSocket `realtime.v1`) apply every event in order, resume without a
//! gap after a kick, and resync from a snapshot on RESET_REQUIRED.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod external;

use std::process::Command;
use std::time::{Duration, Instant};

use external::{install_browser, root, run, serve};

#[test]
fn demo_page_follows_both_feeds_in_chromium() {
    install_browser();
    let server = serve(&[]);
    let started = Instant::now();
    let (ok, out) = run(
        Command::new("node")
            .arg(root().join("tests/browser/realtime.mjs"))
            .arg(&server.base),
        Duration::from_secs(120),
    );
    println!("{out}");
    println!("browser driver took {:?}", started.elapsed());
    assert!(
        ok,
        "the browser driver failed against {}:\n{out}\ndtp serve stderr:\n{}",
        server.base,
        server.stderr.lock().unwrap()
    );
    let summary = out
        .lines()
        .find(|l| l.starts_with("{\"ok\":"))
        .expect("a JSON summary line");
    assert!(summary.starts_with("{\"ok\":true,"), "{summary}");
}
