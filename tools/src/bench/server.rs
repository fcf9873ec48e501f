//! A server process under test: this binary re-executed with a server
//! subcommand, its address read from the first `listening ADDR` line it
//! prints, its CPU and memory read from `/proc`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use dtp_bench::procstat::{self, Sample};

/// Set in a server's environment: it dies with the bench
/// (`dtp_transports::die_with_parent`, called by `main`).
pub(crate) const BENCH_CHILD: &str = "DTP_BENCH_CHILD";

/// How long a server may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// A server process under test.
pub(crate) struct Server {
    child: Child,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// The side's name (`ours`, `tokio`, …).
    pub(crate) name: String,
}

impl Server {
    /// Starts `dtp ARGS` and takes its address from the first stdout line
    /// that begins with `prefix` (up to a `/` or a space, e.g. `realtime
    /// http://ADDR/v1`). Its stderr goes to a pipe whose last lines are the
    /// reason given if it exits before listening.
    pub(crate) fn start(name: &str, args: &[String], prefix: &str) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| format!("own executable: {e}"))?;
        let mut child = Command::new(exe)
            .args(args)
            .env(BENCH_CHILD, "1")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting the {name} server: {e}"))?;
        let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("the {name} server has no output pipes"));
        };
        // Keep the last lines of its stderr for a failure's reason; drain the
        // rest so the server never blocks on a full pipe.
        let (err_tx, err_rx) = mpsc::channel::<String>();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                let _ = err_tx.send(line);
            }
        });
        let (tx, rx) = mpsc::channel::<Option<String>>();
        let prefix = prefix.to_owned();
        std::thread::spawn(move || {
            let mut lines = BufReader::new(stdout).lines();
            let mut sent = false;
            for line in lines.by_ref().map_while(Result::ok) {
                if !sent && let Some(a) = line.strip_prefix(&prefix) {
                    let a = a
                        .split(['/', ' '])
                        .next()
                        .unwrap_or_default()
                        .trim()
                        .to_owned();
                    let _ = tx.send(Some(a));
                    sent = true;
                }
            }
            if !sent {
                let _ = tx.send(None);
            }
        });
        let addr = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(a)) => a
                .parse()
                .map_err(|e| format!("{name} server said {a:?}: {e}")),
            Ok(None) | Err(_) => Err(why_not_listening(name, &mut child, &err_rx)),
        };
        match addr {
            Ok(addr) => Ok(Self {
                child,
                addr,
                name: name.to_owned(),
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The server's CPU and memory now.
    pub(crate) fn sample(&self) -> Result<Sample, String> {
        procstat::sample(self.child.id()).map_err(|e| format!("{} server stats: {e}", self.name))
    }

    /// Stops the server (the figures are already taken).
    pub(crate) fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Why a server printed no address: it exited (with its status), or it
/// did not within [`START_TIMEOUT`]; with the last line of its stderr.
fn why_not_listening(name: &str, child: &mut Child, stderr: &mpsc::Receiver<String>) -> String {
    // Its stdout closed or the wait timed out: give an exiting process a
    // moment to be reaped, so its status can be told.
    let mut running = true;
    for _ in 0..40 {
        if child.try_wait().ok().flatten().is_some() {
            running = false;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let status = child.wait().ok();
    // Once it has exited its stderr ends too: read to the end (bounded in
    // time, should something else hold the pipe) so its last line is in.
    let mut last: Vec<String> = Vec::new();
    let until = std::time::Instant::now() + Duration::from_secs(1);
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        match stderr.recv_timeout(left) {
            Ok(line) => last.push(line),
            Err(_) => break,
        }
        if running && left.is_zero() {
            break;
        }
    }
    // Its own `error: …` line if it printed one, else its last line.
    let why = last
        .iter()
        .rev()
        .find(|l| l.starts_with("error"))
        .or_else(|| last.iter().rev().find(|l| !l.trim().is_empty()))
        .map_or_else(String::new, |l| format!(": {}", l.trim()));
    if running {
        format!("the {name} server did not listen within {START_TIMEOUT:?}{why}")
    } else {
        let status = status.map_or_else(|| "no status".to_owned(), |s| s.to_string());
        format!("the {name} server exited before listening ({status}){why}")
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        // A measurement that panicked or returned early still ends its
        // server; after `stop` this is a no-op.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
