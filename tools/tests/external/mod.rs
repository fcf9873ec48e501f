//! What the tests with external clients (a browser, Python) share: a
//! `dtp serve` on free ports that is killed when dropped, and commands run
//! with a hard deadline.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The workspace root.
pub(crate) fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// A running `dtp serve`, killed when dropped (also on a panic).
pub(crate) struct Server {
    child: Child,
    /// `http://127.0.0.1:PORT/v1`, as printed.
    pub(crate) base: String,
    /// What it wrote on stderr so far.
    pub(crate) stderr: Arc<Mutex<String>>,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Keeps what `r` writes (its last 64 KiB) in `into`, on a thread.
fn drain(mut r: impl Read + Send + 'static, into: Arc<Mutex<String>>) {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n @ 1..) = r.read(&mut buf) {
            let mut s = into.lock().unwrap();
            s.push_str(&String::from_utf8_lossy(&buf[..n]));
            if s.len() > 65536 {
                let cut = s.len() - 65536;
                let cut = (cut..s.len()).find(|&i| s.is_char_boundary(i)).unwrap();
                s.drain(..cut);
            }
        }
    });
}

pub(crate) fn serve(extra: &[&str]) -> Server {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtp"))
        .args([
            "serve",
            "--no-admin",
            "--shards",
            "2",
            "--listen",
            "127.0.0.1:0",
        ])
        .args(["--realtime-listen", "127.0.0.1:0"])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("dtp serve starts");
    let stderr = Arc::new(Mutex::new(String::new()));
    drain(child.stderr.take().unwrap(), stderr.clone());
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            // `realtime http://127.0.0.1:PORT/v1 (SSE, …)`
            if let Some(rest) = line.strip_prefix("realtime ") {
                let _ = tx.send(rest.split_whitespace().next().unwrap_or("").to_owned());
            }
        }
    });
    let mut server = Server {
        child,
        base: String::new(),
        stderr,
    };
    match rx.recv_timeout(Duration::from_secs(30)) {
        Ok(base) if base.starts_with("http://") && base.ends_with("/v1") => server.base = base,
        other => panic!(
            "no realtime line from dtp serve ({other:?}); stderr:\n{}",
            server.stderr.lock().unwrap()
        ),
    }
    server
}

/// Runs `cmd` with a hard deadline: (exit success, stdout + stderr).
pub(crate) fn run(cmd: &mut Command, within: Duration) -> (bool, String) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    let out = Arc::new(Mutex::new(String::new()));
    drain(child.stdout.take().unwrap(), out.clone());
    drain(child.stderr.take().unwrap(), out.clone());
    let deadline = Instant::now() + within;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::thread::sleep(Duration::from_millis(100)); // the drains finish
    let text = out.lock().unwrap().clone();
    match status {
        Some(s) => (s.success(), text),
        None => (false, format!("{text}\n(killed after {within:?})")),
    }
}

/// Installs what the browser tests need (Debian's chromium, the pinned
/// playwright-core) with `tests/browser/install.sh`, unless present.
#[allow(dead_code, reason = "only the browser tests use it")]
pub(crate) fn install_browser() {
    let browser = root().join("tests/browser");
    if Path::new("/usr/bin/chromium").exists()
        && browser.join("node_modules/playwright-core").exists()
    {
        return;
    }
    let (ok, out) = run(
        Command::new("bash").arg(browser.join("install.sh")),
        Duration::from_secs(900),
    );
    assert!(ok, "tests/browser/install.sh failed:\n{out}");
}

/// Starts `cmd` (a browser driver) with its stdout piped: its lines
/// arrive on the receiver as it prints them; stderr passes through.
#[allow(dead_code, reason = "only the browser tests use it")]
pub(crate) fn spawn_lines(cmd: &mut Command) -> (Child, mpsc::Receiver<String>) {
    let mut child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap_or_else(|e| panic!("{cmd:?} does not start: {e}"));
    let (tx, rx) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    (child, rx)
}
