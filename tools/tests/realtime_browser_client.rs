//! The browser client module (`/v1/client.js`) in a real browser against
//! a real `dtp serve` (SPEC RT-4, RT-5, RT-7, RT-11):
//! `tests/browser/client.mjs` drives a page of the realtime origin that
//! follows one stream over SSE, WebSocket and polling in Debian's headless
//! chromium, through a network cut, a kick, a dropped WebSocket event (a
//! gap), a retention cut (RESET_REQUIRED, then a snapshot), a
//! 10,000-event burst while the page's main thread is held until half of
//! it is out (the WebSocket that falls behind is closed OVERLOADED with a
//! `retryAfterMs` hint and resumes from its cursor no sooner; SSE is reset
//! to a snapshot; the apply queue and dedupe window stay within their
//! ceilings, read from the client's `metrics()`), a token that may not
//! read (FORBIDDEN, no retry), a gateway restart and, last, a gateway gone for good (DEGRADED). Every
//! applied event follows the one or the snapshot before it: no gap, no
//! duplicate.
//!
//! After the restart the WebSocket's credential, the session cookie, is
//! one the restarted gateway no longer knows; its refused upgrade looks
//! like a lost network to a browser (1006), so the client asks the gateway
//! with the cookie alone, reads the 401 as AUTH_REQUIRED and recovers
//! through the page's `onAuthRequired` (one login) instead of spending its
//! budget; SSE and snapshots send the token itself and recover alone.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(dead_code, reason = "shared with the other external-client tests")]
mod external;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use external::{install_browser, root, spawn_lines};

/// The demo stream with room for the burst, the demo credential, one that
/// may read another stream only, short SSE `retry:` and CLOSE OVERLOADED
/// hints so that the page's lowered reconnect budget (10 attempts, at
/// most 2 s apart) can outlast a restart and take the hint, and room for the snapshots of three clients that
/// share one credential and resync often (else a 429's Retry-After above
/// those 2 s would end them DEGRADED, as RT-7 wants).
const CONFIG: &str = r#"[realtime.limits]
sse_retry_ms = 300
overload_retry_ms = 300
poll_burst = 50

[[realtime.clients]]
token = "dtp-demo-token"
streams = ["*"]
publish = true
admin = true

[[realtime.clients]]
token = "outsider-token-0123456789"
streams = ["other"]

[[realtime.streams]]
id = "demo"
recovery = "CURSOR"
event_types = ["demo.tick"]
scope = "demo-scope"
retain_events = 20000

[[realtime.streams]]
id = "other"
recovery = "CURSOR"
event_types = ["demo.tick"]
scope = "other-scope"
"#;

/// `dtp serve` with `config` and its realtime port on `port`, once it
/// printed its realtime address.
fn start(config: &Path, port: u16) -> Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtp"))
        .args([
            "serve",
            "--no-admin",
            "--shards",
            "2",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--realtime-listen", &format!("127.0.0.1:{port}")])
        .arg("--config")
        .arg(config)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dtp serve starts");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    loop {
        let Some(Ok(line)) = lines.next() else {
            let mut err = String::new();
            let _ = std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut err);
            panic!("dtp serve exited:\n{err}");
        };
        if line.starts_with("realtime ") {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    let stderr = child.stderr.take().unwrap();
    std::thread::spawn(move || std::io::copy(&mut BufReader::new(stderr), &mut std::io::sink()));
    child
}

/// Kills `child`, waits for it, and then for its realtime port to be
/// free: an io_uring ring (and the listening socket it holds) is torn
/// down after the process is gone, and a gateway restarted on the port
/// meanwhile exits with ADDRESS_IN_USE.
fn kill(mut child: Child, port: u16) {
    let _ = child.kill();
    let _ = child.wait();
    let end = Instant::now() + Duration::from_secs(10);
    while TcpListener::bind(("127.0.0.1", port)).is_err() && Instant::now() < end {
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn the_client_module_applies_every_event_once_through_cuts_kicks_gaps_resets_and_restarts() {
    drive("recovery");
}

#[test]
fn the_client_module_applies_a_ten_thousand_event_burst_in_order_within_its_ceilings() {
    drive("burst");
}

/// Runs `part` of the driver against a gateway of its own, restarting or
/// stopping it when the driver asks.
fn drive(part: &str) {
    install_browser();
    let dir =
        std::env::temp_dir().join(format!("dtp-client-browser-{}-{part}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let config = dir.join("serve.toml");
    std::fs::write(&config, CONFIG).unwrap();
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let mut server = Some(start(&config, port));
    let started = Instant::now();
    let (mut node, rx) = spawn_lines(
        Command::new("node")
            .arg(root().join("tests/browser/client.mjs"))
            .arg(format!("http://127.0.0.1:{port}"))
            .arg(part)
            .current_dir(root().join("tests/browser"))
            .stdin(Stdio::piped()),
    );
    let mut stdin = node.stdin.take().unwrap();
    let wait = Duration::from_secs(120);
    let summary = loop {
        let line = rx.recv_timeout(wait).unwrap_or_default();
        match line.as_str() {
            "RESTART" => {
                kill(server.take().unwrap(), port);
                server = Some(start(&config, port));
                writeln!(stdin, "restarted").unwrap();
            }
            "STOP" => {
                kill(server.take().unwrap(), port);
                writeln!(stdin, "stopped").unwrap();
            }
            _ => break line,
        }
    };
    let _ = node.kill();
    let _ = node.wait();
    if let Some(s) = server {
        kill(s, port);
    }
    let _ = std::fs::remove_dir_all(&dir);
    println!("{summary}");
    println!("the browser driver took {:?}", started.elapsed());
    let v: serde_json::Value = serde_json::from_str(&summary)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}): {summary}"));
    assert_eq!(v["ok"], true, "{v:#}");
    assert!(v["checks"].as_u64().unwrap() > 5, "{v:#}");
}
