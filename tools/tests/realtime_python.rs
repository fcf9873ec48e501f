//! A real non-Rust WebSocket client against `dtp serve --echo` (SPEC RT-9):
//! `tests/python/test_ws.py` runs the Python `websockets` library (and raw
//! sockets where the library refuses to misbehave) through RFC 6455 on
//! `/v1/echo` and `realtime.v1` on `/v1/ws`.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

mod external;

use std::process::Command;
use std::time::Duration;

use external::{root, run, serve};

fn install_if_missing() {
    let python = root().join("tests/python");
    if python.join(".venv/bin/python").exists() {
        return;
    }
    let (ok, out) = run(
        Command::new("bash").arg(python.join("install.sh")),
        Duration::from_secs(600),
    );
    assert!(ok, "tests/python/install.sh failed:\n{out}");
}

#[test]
fn python_websockets_client_passes_every_check() {
    install_if_missing();
    let server = serve(&["--echo"]);
    let python = root().join("tests/python");
    let (ok, out) = run(
        Command::new(python.join(".venv/bin/python"))
            .arg(python.join("test_ws.py"))
            .arg(&server.base)
            .current_dir(&python),
        Duration::from_secs(60),
    );
    println!("{out}");
    assert!(
        ok,
        "test_ws.py failed against {}:\n{out}\ndtp serve stderr:\n{}",
        server.base,
        server.stderr.lock().unwrap()
    );
    let last = out
        .lines()
        .rev()
        .find(|l| l.contains(" passed, "))
        .unwrap_or("");
    assert!(last.ends_with(" passed, 0 failed"), "{last}");
    assert!(!out.contains("FAIL "), "{out}");
}
