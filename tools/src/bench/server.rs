//! A server process under test: this binary re-executed with a server
//! subcommand, its endpoint read from the first `listening ENDPOINT` line
//! it prints (and for QUIC its certificate's pin from the `quic
//! certificate sha256 HEX` line), its CPU and memory read from `/proc`.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::str::FromStr;
use std::sync::mpsc;
use std::time::Duration;

use dtp_bench::procstat::{self, Sample};
use dtp_transports::Endpoint;

/// Set in a server's environment: it dies with the bench
/// (`dtp_transports::die_with_parent`, called by `main`).
pub(crate) const BENCH_CHILD: &str = "DTP_BENCH_CHILD";

/// How long a server may take to print its address.
const START_TIMEOUT: Duration = Duration::from_secs(30);

/// The line a server prints with its QUIC certificate's SHA-256 (what a
/// client pins), as `dtp serve` prints it.
pub(crate) const PIN_PREFIX: &str = "quic certificate sha256 ";

/// A server process under test.
pub(crate) struct Server {
    child: Child,
    /// Where it listens.
    pub(crate) endpoint: Endpoint,
    /// The SHA-256 of its QUIC certificate, for a `quic:` endpoint.
    pub(crate) pin: Option<[u8; 32]>,
    /// The side's name (`ours`, `tokio`, …).
    pub(crate) name: String,
}

impl Server {
    /// Starts `dtp ARGS` and takes its endpoint from the first stdout line
    /// that begins with `prefix`: the text up to a space, read as an
    /// endpoint (`unix:PATH`, `ws:ADDR/PATH`, …) or else as the TCP
    /// address before any `/` (e.g. `realtime http://ADDR/v1`). For a
    /// `quic:` endpoint it also waits for the certificate's pin. Its
    /// stderr goes to a pipe whose last lines are the reason given if it
    /// exits before listening.
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
        let (tx, rx) = mpsc::channel::<Option<Result<Announced, String>>>();
        let prefix = prefix.to_owned();
        std::thread::spawn(move || {
            let mut heard = Heard::default();
            let mut sent = false;
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if !sent && let Some(announced) = heard.line(&prefix, &line) {
                    let _ = tx.send(Some(announced));
                    sent = true;
                }
            }
            if !sent {
                let _ = tx.send(None);
            }
        });
        let announced = match rx.recv_timeout(START_TIMEOUT) {
            Ok(Some(a)) => a.map_err(|e| format!("{name} server: {e}")),
            Ok(None) | Err(_) => Err(why_not_listening(name, &mut child, &err_rx)),
        };
        match announced {
            Ok(a) => Ok(Self {
                child,
                endpoint: a.endpoint,
                pin: a.pin,
                name: name.to_owned(),
            }),
            Err(e) => {
                let _ = child.kill();
                let _ = child.wait();
                Err(e)
            }
        }
    }

    /// The TCP address it listens on (its HTTP port, for the realtime and
    /// control servers).
    pub(crate) fn tcp_addr(&self) -> Result<SocketAddr, String> {
        self.endpoint.tcp_port().ok_or_else(|| {
            format!(
                "the {} server listens on {}, not TCP",
                self.name, self.endpoint
            )
        })
    }

    /// The server's CPU and memory now.
    pub(crate) fn sample(&self) -> Result<Sample, String> {
        procstat::sample(self.child.id()).map_err(|e| format!("{} server stats: {e}", self.name))
    }

    /// The CPU time of its threads named `name` now, ns (`None`: none).
    pub(crate) fn thread_cpu_ns(&self, name: &str) -> Option<u64> {
        procstat::thread_cpu_ns(self.child.id(), name)
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

/// What a server announced: its endpoint, and its pin for QUIC.
struct Announced {
    endpoint: Endpoint,
    pin: Option<[u8; 32]>,
}

/// The lines of a starting server read so far.
#[derive(Default)]
struct Heard {
    endpoint: Option<Endpoint>,
    pin: Option<[u8; 32]>,
}

impl Heard {
    /// Takes in one line; once everything needed is in, what was
    /// announced (or why it cannot be used).
    fn line(&mut self, prefix: &str, line: &str) -> Option<Result<Announced, String>> {
        if let Some(hex) = line.strip_prefix(PIN_PREFIX) {
            match crate::cred_cmd::parse::parse_hex32(hex.trim()) {
                Some(pin) => self.pin = Some(pin),
                None => return Some(Err(format!("a pin that is not 64 hex digits: {line:?}"))),
            }
        } else if self.endpoint.is_none()
            && let Some(rest) = line.strip_prefix(prefix)
        {
            let text = rest.split(' ').next().unwrap_or_default().trim();
            let endpoint = Endpoint::from_str(text).ok().or_else(|| {
                let addr = text.split('/').next().unwrap_or_default();
                addr.parse::<SocketAddr>().ok().map(Endpoint::Tcp)
            });
            match endpoint {
                Some(e) => self.endpoint = Some(e),
                None => return Some(Err(format!("said {line:?}: no endpoint there"))),
            }
        }
        let endpoint = self.endpoint.as_ref()?;
        let quic = matches!(endpoint, Endpoint::Quic(_));
        if quic && self.pin.is_none() {
            return None;
        }
        Some(Ok(Announced {
            endpoint: endpoint.clone(),
            pin: self.pin.filter(|_| quic),
        }))
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, reason = "tests")]

    use super::*;

    fn heard(prefix: &str, lines: &[&str]) -> Option<Result<Announced, String>> {
        let mut h = Heard::default();
        lines.iter().find_map(|l| h.line(prefix, l))
    }

    #[test]
    fn every_kind_of_listening_line_gives_its_endpoint() {
        for (prefix, line, endpoint) in [
            (
                "listening ",
                "listening 127.0.0.1:7000",
                "tcp:127.0.0.1:7000",
            ),
            (
                "listening ",
                "listening ws:127.0.0.1:7000/dtp",
                "ws:127.0.0.1:7000/dtp",
            ),
            (
                "listening ",
                "listening rtsp:127.0.0.1:7000",
                "rtsp:127.0.0.1:7000",
            ),
            (
                "listening ",
                "listening unix:/tmp/x/dtp.sock",
                "unix:/tmp/x/dtp.sock",
            ),
            (
                "realtime http://",
                "realtime http://127.0.0.1:80/v1 (SSE)",
                "tcp:127.0.0.1:80",
            ),
        ] {
            let a = heard(prefix, &["protocol dtp", line]).unwrap().unwrap();
            assert_eq!(a.endpoint.to_string(), endpoint);
            assert_eq!(a.pin, None);
        }
    }

    #[test]
    fn a_quic_endpoint_waits_for_its_pin() {
        let pin = "ab".repeat(32);
        let line = format!("{PIN_PREFIX}{pin}");
        let lines = ["listening quic:127.0.0.1:7000", line.as_str()];
        let mut h = Heard::default();
        assert!(h.line("listening ", lines[0]).is_none());
        let a = h.line("listening ", lines[1]).unwrap().unwrap();
        assert_eq!(a.endpoint.to_string(), "quic:127.0.0.1:7000");
        assert_eq!(a.pin, Some([0xab; 32]));
        assert!(
            heard("listening ", &["listening nowhere"])
                .unwrap()
                .is_err()
        );
    }
}
