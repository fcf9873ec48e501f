//! The operator console (`/console` on the admin port) in a real browser
//! (SPEC HO-3c): `dtp serve` with `[terminal]` and an admin token, two
//! Fays over real TCP; `tests/browser/console.mjs` drives the page in
//! Debian's headless chromium through playwright-core. The page asks for
//! the token, lists the sessions, shows a pending human decision with
//! source and target Fay, resource, access mode, reason and time left —
//! never a key id or credential — recommends Reject, and its Allow
//! reaches the Fay as a granted session.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(dead_code, reason = "shared with the external-client tests")]
mod external;
#[allow(
    dead_code,
    reason = "the support module is shared by the terminal tests; each uses part of it"
)]
mod support;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use dtp_codec::{AccessMode, AuthOutcome};
use dtp_test_kit::Fay;
use external::{install_browser, root, spawn_lines};
use support::{Serve, Setup};

/// `arm`: a person decides its handovers on the external panel.
const TERMINAL: &str = r#"[terminal.control]
terminal_id = "t1"

[[terminal.control.resources]]
resource_id = "arm"
handover_policy = "ask"

[terminal.control.policies.ask]
policy = { policy_type = "human_decision", ui_channel = "external_panel" }
"#;

/// Where the screenshot goes: `DTP_CONSOLE_SCREENSHOT` (the README's
/// `docs/console.png` is made so), else a scratch file.
fn screenshot_path(setup: &Setup) -> PathBuf {
    std::env::var_os("DTP_CONSOLE_SCREENSHOT")
        .map_or_else(|| setup.dir.join("console.png"), PathBuf::from)
}

#[test]
fn a_person_allows_a_handover_from_the_console_in_chromium() {
    install_browser();
    let setup = Setup::new("console");
    let a = setup.fay("fay-a", &["arm=write"]);
    let b = setup.fay("fay-b", &["arm=write"]);
    let token = "console-test-token-0123456789abcdef";
    let token_file = setup.dir.join("admin.token");
    std::fs::write(&token_file, format!("{token}\n")).unwrap();
    let config = setup.config(TERMINAL);
    let text = std::fs::read_to_string(&config).unwrap().replacen(
        "[admin]\n",
        &format!("[admin]\ntoken_file = \"{}\"\n", token_file.display()),
        1,
    );
    std::fs::write(&config, text).unwrap();
    let serve = Serve::start(&config);
    let mut fay_a = Fay::connect(serve.addr, &setup.fay_config(&a));
    let mut fay_b = Fay::connect(serve.addr, &setup.fay_config(&b));
    let sa = fay_a.session(1, "arm", AccessMode::Write);

    let shot = screenshot_path(&setup);
    let started = Instant::now();
    let (mut node, rx) = spawn_lines(
        Command::new("node")
            .arg(root().join("tests/browser/console.mjs"))
            .arg(format!("http://{}", serve.admin))
            .arg(token)
            .arg(&shot)
            .current_dir(root().join("tests/browser"))
            .stdin(Stdio::piped()),
    );
    let wait = Duration::from_secs(45);
    let ready = rx.recv_timeout(wait).unwrap_or_default();
    if ready != "READY" {
        let _ = node.kill();
        let _ = node.wait();
        panic!("the console did not come up: {ready}");
    }
    // SPEC HO-1: fay-b asks for the held arm; the policy asks a person.
    fay_b.ask(7, "arm", AccessMode::Write);
    let mut stdin = node.stdin.take().unwrap();
    writeln!(stdin, "asked").unwrap();
    let summary = rx.recv_timeout(wait).unwrap_or_default();
    let _ = node.kill();
    let _ = node.wait();
    let v: serde_json::Value = serde_json::from_str(&summary)
        .unwrap_or_else(|e| panic!("no JSON summary ({e}): {summary}"));
    println!(
        "the pending decision appeared on the page {} ms after the request; the driver took {:?}",
        v["appearedMs"],
        started.elapsed()
    );
    assert_eq!(v["ok"], true, "{v:#}");
    assert_eq!(v["askedForToken"], true, "{v:#}");
    assert_eq!(v["formHiddenAfter"], true, "{v:#}");
    assert!(
        v["headers"]["csp"]
            .as_str()
            .unwrap()
            .contains("frame-ancestors 'none'"),
        "{v:#}"
    );

    // SPEC HO-3c: source, target, resource, mode, reason, time left.
    let fields: Vec<&str> = v["fields"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap())
        .collect();
    assert_eq!(fields[..4], ["fay-a", "fay-b", "arm", "write"], "{v:#}");
    assert!(!fields[4].is_empty(), "a reason: {v:#}");
    assert!(fields[5].ends_with('s'), "time left in seconds: {v:#}");
    assert_eq!(fields[6], "reject", "{v:#}");
    // Reject first and recommended.
    assert_eq!(v["buttons"][0], "Reject (recommended)", "{v:#}");
    assert_eq!(v["buttons"][1], "Allow", "{v:#}");
    assert!(v["handovers"].as_str().unwrap().contains("arm"), "{v:#}");
    // Never a key id or any line of a credential, anywhere on the page.
    let html = v["html"].as_str().unwrap();
    assert!(!html.contains(&setup.issuer_key_id), "key id shown");
    for files in [&a, &b] {
        let credential = std::fs::read_to_string(&files.credential).unwrap();
        for line in credential
            .lines()
            .filter(|l| !l.starts_with("-----") && l.len() > 20)
        {
            assert!(!html.contains(line), "credential shown");
        }
    }
    assert!(!html.contains(token), "the token shown");

    // Allowed from the page: fay-b holds the arm, fay-a's session ended.
    assert!(v["decided"].as_str().unwrap().ends_with("allowed"), "{v:#}");
    assert_eq!(v["stillPending"], 0, "{v:#}");
    let AuthOutcome::Granted { session_id: sb } = fay_b.outcome(7) else {
        panic!("fay-b was refused");
    };
    assert_eq!(fay_a.terminated(sa).as_deref(), Some("handed_over"));
    assert!(
        v["sessions"].as_str().unwrap().contains(&sb.to_string()),
        "{v:#}"
    );
    assert!(shot.exists(), "a screenshot at {}", shot.display());
}
