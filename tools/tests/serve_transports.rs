//! SPEC TRN-1 … TRN-5 through the built binaries: one `dtp serve` listens
//! on every transport at once (`[engine] listen` with a TCP port, a Unix
//! socket, `ws:`, `rtsp:`, `quic:` and `ble-sim:` endpoints — BLE on its
//! simulated link, as these machines have no Bluetooth; the QUIC
//! certificate made at start-up and pinned by the client from the line the
//! gateway prints), and `dtp load --dtp --target SCHEME:…`
//! streams over each for a few seconds: every fragment sent is
//! acknowledged once, on both IO backends; with cuts mid-stream
//! (`--disconnect-every`) each session resumes on the same transport.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

#[allow(
    dead_code,
    reason = "the support module is shared by the serve tests; each uses part of it"
)]
mod support;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use support::{BACKENDS, Scratch, dtp, fay_args, load_keys};

/// A `dtp serve` on several listeners (or `dtp bench`'s WebSocket peer),
/// killed when dropped.
struct Gateway {
    child: Child,
    /// The endpoints it printed (`listening …`), TCP as `tcp:HOST:PORT`.
    listening: Vec<String>,
    /// The SHA-256 of its QUIC certificate, as printed (hex).
    quic_pin: Option<String>,
}

impl Gateway {
    /// `dtp serve --config CONFIG` (two shards, no admin port, no realtime
    /// front end) on `backend`, once it printed its backend line (after
    /// every `listening` line).
    fn start(config: &Path, backend: &str) -> Self {
        let mut serve = dtp();
        serve
            .args([
                "serve",
                "--shards",
                "2",
                "--no-pin",
                "--no-admin",
                "--no-realtime",
            ])
            .arg("--config")
            .arg(config)
            .env("DTP_IO_BACKEND", backend);
        Self::spawn(serve, |line| line.starts_with("backend "))
    }

    /// `dtp bench`'s tokio-tungstenite peer (`dtp __peer-tokio
    /// --websocket /dtp`) with the `[dtp]` keys of `config`, once it printed
    /// its `listening ws:…` line.
    fn ws_peer(config: &Path) -> Self {
        let mut peer = dtp();
        peer.args(["__peer-tokio", "--listen", "127.0.0.1:0", "--workers", "2"])
            .args(["--websocket", "/dtp", "--config"])
            .arg(config);
        Self::spawn(peer, |line| line.starts_with("listening "))
    }

    /// Runs `cmd`, collecting the endpoints of its `listening` lines (and
    /// its QUIC certificate line) until a line `done` accepts.
    fn spawn(mut cmd: Command, done: impl Fn(&str) -> bool) -> Self {
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut listening = Vec::new();
        let mut quic_pin = None;
        loop {
            let line = lines.next().expect("the server exited").unwrap();
            if let Some(at) = line.strip_prefix("listening ") {
                let at = if at.contains(':') && at.parse::<std::net::SocketAddr>().is_ok() {
                    format!("tcp:{at}")
                } else {
                    at.to_owned()
                };
                listening.push(at);
            } else if let Some(sha) = line.strip_prefix("quic certificate sha256 ") {
                quic_pin = Some(sha.to_owned());
            }
            if done(&line) {
                break;
            }
        }
        std::thread::spawn(move || for _ in lines {});
        Gateway {
            child,
            listening,
            quic_pin,
        }
    }

    /// `dtp load`'s arguments for its endpoint with `scheme`: the target,
    /// and for QUIC the certificate pinned.
    fn target(&self, scheme: &str) -> Vec<String> {
        let mut args = vec!["--target".to_owned(), self.at(scheme).to_owned()];
        if scheme == "quic" {
            let pin = self.quic_pin.clone().expect("no quic certificate line");
            args.extend(["--quic-pin".to_owned(), pin]);
        }
        args
    }

    /// The endpoint it listens on with `scheme`.
    fn at(&self, scheme: &str) -> &str {
        self.listening
            .iter()
            .find(|a| a.starts_with(&format!("{scheme}:")))
            .unwrap_or_else(|| panic!("no {scheme}: listener in {:?}", self.listening))
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `dtp load --dtp TARGET --workload stream` for `secs` seconds on two
/// connections with `extra` arguments; the report, which must say the run
/// succeeded.
fn stream(
    dir: &Path,
    fay: &[String],
    target: &[String],
    backend: &str,
    secs: &str,
    extra: &[&str],
) -> serde_json::Value {
    load(dir, fay, target, backend, "stream", secs, extra)
}

/// `dtp load --dtp TARGET --workload WORKLOAD`, as [`stream`].
fn load(
    dir: &Path,
    fay: &[String],
    target: &[String],
    backend: &str,
    workload: &str,
    secs: &str,
    extra: &[&str],
) -> serde_json::Value {
    let json = dir.join("load.json");
    let _ = std::fs::remove_file(&json);
    let out = dtp()
        .args(["load", "--shards", "1", "--warmup", "0"])
        .args(target)
        .args(fay)
        .args(["--workload", workload, "--connections", "2"])
        .args(["--duration", secs])
        .args(extra)
        .arg("--json")
        .arg(&json)
        .env("DTP_IO_BACKEND", backend)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{target:?} on {backend}: {}\n{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap()
}

/// Every fragment sent was delivered once, with nothing failed.
fn assert_every_fragment_once(v: &serde_json::Value, what: &str) {
    let dtp = &v["dtp"];
    let sent = dtp["sent"].as_u64().unwrap();
    assert!(sent > 0, "{what}: {v:#}");
    assert_eq!(dtp["delivered"].as_u64(), Some(sent), "{what}: {v:#}");
    assert_eq!(dtp["lost"].as_u64(), Some(0), "{what}: {v:#}");
    assert_eq!(dtp["duplicated"].as_u64(), Some(0), "{what}: {v:#}");
    assert_eq!(dtp["failed_flows"].as_u64(), Some(0), "{what}: {v:#}");
    assert_eq!(v["errors"].as_u64(), Some(0), "{what}: {v:#}");
}

/// The schemes one gateway serves DTP on.
const SCHEMES: [&str; 6] = ["tcp", "unix", "ws", "rtsp", "quic", "ble-sim"];

#[test]
fn one_gateway_streams_dtp_over_every_transport_and_resumes_on_each() {
    let scratch = Scratch::new("transports");
    let dir = &scratch.0;
    let keys = load_keys();
    let section = keys.write_files(dir).dtp_section("");
    let fay = fay_args(dir, &keys);
    for (backend, name) in BACKENDS {
        let sock = dir.join(format!("g-{backend}.sock"));
        let ble = dir.join(format!("g-{backend}-ble.sock"));
        let config = dir.join(format!("{backend}.toml"));
        let listen = format!(
            "[engine]\nlisten = [\"127.0.0.1:0\", \"unix:{}\", \"ws:127.0.0.1:0/dtp\", \"rtsp:127.0.0.1:0\", \"quic:127.0.0.1:0\", \"ble-sim:{}\"]\n\n",
            sock.display(),
            ble.display()
        );
        std::fs::write(&config, format!("{listen}{section}")).unwrap();
        let gateway = Gateway::start(&config, backend);
        assert_eq!(
            gateway.listening.len(),
            SCHEMES.len(),
            "{:?}",
            gateway.listening
        );
        for scheme in SCHEMES {
            let target = gateway.target(scheme);
            let at = gateway.at(scheme);
            // BLE's 247-byte SDUs are the slowest link: it gets longer.
            let secs = if scheme == "ble-sim" { "3" } else { "1.5" };
            let v = stream(dir, &fay, &target, backend, secs, &[]);
            assert_eq!(v["backend"].as_str(), Some(name), "{v:#}");
            assert_every_fragment_once(&v, &format!("{at} on {backend}"));
            // Cut every connection at its 200th fragment: each resumes its
            // session on a new connection of the same transport.
            if backend == "uring" {
                let v = stream(
                    dir,
                    &fay,
                    &target,
                    backend,
                    secs,
                    &["--disconnect-every", "200"],
                );
                let what = format!("{at} with cuts");
                assert_every_fragment_once(&v, &what);
                let (cuts, resumes) = (&v["dtp"]["cuts"], &v["dtp"]["resumes"]);
                assert!(cuts.as_u64().unwrap() > 0, "{what}: {v:#}");
                assert_eq!(cuts, resumes, "{what}: {v:#}");
            }
        }
    }
}

/// `dtp ARGS` (with `--config CONFIG` for `serve`) refused before
/// anything runs: exit status 2 and one line on stderr, which starts with
/// `starts` and holds `needle`.
fn assert_refused(args: &[&str], config: Option<&Path>, starts: &str, needle: &str) {
    let mut cmd = dtp();
    cmd.args(args);
    if let Some(config) = config {
        cmd.args(["--no-admin", "--no-realtime", "--config"])
            .arg(config);
    }
    let out = cmd.output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
    assert!(err.starts_with(starts), "{args:?}: {err}");
    assert!(err.contains(needle), "{args:?}: {err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{args:?}: {err}");
}

/// SPEC TRN-4 on a host without Bluetooth (these machines): a gateway
/// with a `ble:` listener, and a load with a `ble:` target, are refused
/// before anything runs, with one line saying why (exit status 2).
#[test]
fn ble_without_bluetooth_is_refused_before_anything_runs() {
    if dtp_transports::probe_ble().is_ok() {
        return; // a host with Bluetooth: nothing to check here
    }
    let scratch = Scratch::new("ble-none");
    let config = scratch.0.join("ble.toml");
    std::fs::write(
        &config,
        "[engine]\nlisten = [\"ble:00:00:00:00:00:00/psm/0x80\"]\n",
    )
    .unwrap();
    let none = "Bluetooth is not available on this host (";
    assert_refused(
        &["serve"],
        Some(&config),
        "error: BAD_CONFIG engine.listen ble:00:00:00:00:00:00/psm/128?mtu=247: ",
        none,
    );
    assert_refused(
        &["load", "--dtp", "--target", "ble:00:11:22:33:44:55/psm/128"],
        None,
        "error: BAD_ARGUMENT --target ble:00:11:22:33:44:55/psm/128?mtu=247: ",
        none,
    );
}

/// A BLE MTU the receive buffers could not tell from a cut SDU is a
/// configuration mistake, refused before anything runs (exit status 2),
/// by the gateway and by the load generator.
#[test]
fn a_ble_mtu_above_the_receive_buffers_is_refused_before_anything_runs() {
    let scratch = Scratch::new("ble-mtu");
    let config = scratch.0.join("ble.toml");
    let sock = scratch.0.join("b.sock");
    std::fs::write(
        &config,
        format!(
            "[engine]\nlisten = [\"ble-sim:{}?mtu=5000\"]\n\n[io]\nchunk_size = 4096\n",
            sock.display()
        ),
    )
    .unwrap();
    assert_refused(
        &["serve"],
        Some(&config),
        "error: BAD_CONFIG engine.listen ble-sim:",
        "mtu 5000 needs receive buffers larger than it: raise io.chunk_size (4096)",
    );
    // The load generator's buffers are its own: 16 KiB.
    let target = format!("ble-sim:{}?mtu=20000", sock.display());
    assert_refused(
        &["load", "--dtp", "--target", &target],
        None,
        "error: BAD_ARGUMENT --target ble-sim:",
        "mtu 20000 is more than dtp load receives in one buffer (16384 bytes)",
    );
}

/// A `quic:` target needs the gateway's certificate pinned, and a pin
/// needs a `quic:` target: each refused before anything runs, one line,
/// exit status 2.
#[test]
fn quic_pins_are_checked_before_anything_runs() {
    let pin = "00".repeat(32);
    let cases: [(&[&str], &str); 3] = [
        (&["--target", "quic:127.0.0.1:9"], "needs --quic-pin"),
        (
            &["--target", "127.0.0.1:9", "--quic-pin", &pin],
            "quic:HOST:PORT target only",
        ),
        (
            &["--target", "quic:127.0.0.1:9", "--quic-pin", "nothex"],
            "neither 64 hex digits nor a file",
        ),
    ];
    for (args, needle) in cases {
        let out = dtp().arg("load").args(args).output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    }
}

/// The peer of `dtp-pingpong-ws` and `dtp-stream-ws` speaks DTP over
/// WebSocket to our client (`dtp load --target ws:…`, which insists on the
/// `dtp.v1` subprotocol): both workloads with every fragment delivered
/// once, and sessions cut mid-stream resumed on new WebSocket connections.
#[test]
fn the_tokio_tungstenite_peer_serves_dtp_over_websocket() {
    let scratch = Scratch::new("ws-peer");
    let dir = &scratch.0;
    let keys = load_keys();
    let config = dir.join("dtp.toml");
    std::fs::write(&config, keys.write_files(dir).dtp_section("")).unwrap();
    let fay = fay_args(dir, &keys);
    let peer = Gateway::ws_peer(&config);
    let at = peer.at("ws");
    assert!(
        at.starts_with("ws:127.0.0.1:") && at.ends_with("/dtp"),
        "{at}"
    );
    let target = peer.target("ws");
    for workload in ["pingpong", "stream"] {
        let v = load(dir, &fay, &target, "uring", workload, "1.5", &[]);
        assert_every_fragment_once(&v, &format!("{workload} against the peer"));
    }
    let v = stream(
        dir,
        &fay,
        &target,
        "uring",
        "1.5",
        &["--disconnect-every", "200"],
    );
    let what = "the peer with cuts";
    assert_every_fragment_once(&v, what);
    let (cuts, resumes) = (&v["dtp"]["cuts"], &v["dtp"]["resumes"]);
    assert!(cuts.as_u64().unwrap() > 0, "{what}: {v:#}");
    assert_eq!(cuts, resumes, "{what}: {v:#}");
}
