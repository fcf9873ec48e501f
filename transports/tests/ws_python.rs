//! SPEC TRN-5 against a WebSocket implementation we did not write: the
//! Python `websockets` library (tests/python/dtp_ws_peer.py) as the other
//! end of [`WebSocket`], both ways. Our client sends random bytes to its
//! echo server and must get every byte back unaltered and in order; its
//! client sends a file's bytes to our server, which echoes them, and checks
//! the same. The venv is made by tests/python/install.sh on first use.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use dtp_transports::{
    BackendPreference, Driver, DriverConfig, Endpoint, Event, SendError, Transport, WebSocket,
    WsConfig,
};

fn python() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/python");
    let venv = dir.join(".venv/bin/python");
    if !venv.exists() {
        let status = Command::new("bash")
            .arg(dir.join("install.sh"))
            .status()
            .unwrap();
        assert!(status.success(), "tests/python/install.sh failed");
    }
    venv
}

fn peer_script() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/python/dtp_ws_peer.py")
}

fn transport(backend: BackendPreference) -> WebSocket<Driver> {
    let driver = Driver::new(DriverConfig {
        backend,
        ..DriverConfig::default()
    })
    .unwrap();
    WebSocket::new(driver, WsConfig::default())
}

fn payload(n: usize) -> Vec<u8> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// Kills the Python peer when the test ends, however it ends.
struct Peer(Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn our_client_round_trips_bytes_through_a_python_websockets_echo_server() {
    let py = python();
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let mut child = Peer(
            Command::new(&py)
                .arg(peer_script())
                .arg("echo-server")
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let mut line = String::new();
        BufReader::new(child.0.stdout.take().unwrap())
            .read_line(&mut line)
            .unwrap();
        let port: u16 = line.trim().parse().expect("the echo server's port");
        let mut ws = transport(backend);
        let at: Endpoint = format!("ws:127.0.0.1:{port}/dtp").parse().unwrap();
        let conn = ws.connect(&at).unwrap();
        let want = payload(3 << 20);
        let (mut sent, mut got, mut up) = (0, Vec::new(), false);
        let mut sizes = [1usize, 10, 1000, 16 * 1024, 100_000, 1 << 20]
            .into_iter()
            .cycle();
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = Vec::new();
        while got.len() < want.len() {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: stalled at {} bytes",
                got.len()
            );
            while sent < want.len() {
                let n = sizes.next().unwrap().min(want.len() - sent);
                match ws.send(conn, &want[sent..sent + n]) {
                    Ok(()) => sent += n,
                    Err(SendError::BufferFull) => break,
                    Err(e) => panic!("{e}"),
                }
            }
            ws.poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Connected { .. } => up = true,
                    Event::Received { data, .. } => got.extend_from_slice(&data),
                    Event::Closed { reason, .. } => panic!("{backend:?}: closed: {reason:?}"),
                    _ => {}
                }
            }
        }
        assert!(up, "{backend:?}");
        assert!(got == want, "{backend:?}: the echoed bytes differ");
    }
}

#[test]
fn a_python_websockets_client_round_trips_bytes_through_our_server() {
    let py = python();
    for backend in [BackendPreference::Uring, BackendPreference::Epoll] {
        let mut ws = transport(backend);
        let any: Endpoint = "ws:127.0.0.1:0/dtp".parse().unwrap();
        let (_, bound) = ws.listen(&any, false).unwrap();
        let file = std::env::temp_dir().join(format!("dtp-ws-python-{}.bin", std::process::id()));
        std::fs::write(&file, payload(1 << 20)).unwrap();
        let mut child = Peer(
            Command::new(&py)
                .arg(peer_script())
                .arg("client")
                .arg(bound.to_string().replacen("ws:", "ws://", 1))
                .arg(&file)
                .stdout(Stdio::piped())
                .spawn()
                .unwrap(),
        );
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut events = Vec::new();
        let mut backlog: Vec<u8> = Vec::new();
        let mut conn = None;
        let status = loop {
            assert!(
                Instant::now() < deadline,
                "{backend:?}: the Python client never finished"
            );
            if let Some(status) = child.0.try_wait().unwrap() {
                break status;
            }
            ws.poll(&mut events, Some(Duration::from_millis(5)))
                .unwrap();
            for e in events.drain(..) {
                match e {
                    Event::Accepted { conn: c, .. } => conn = Some(c),
                    Event::Received { data, .. } => backlog.extend_from_slice(&data),
                    _ => {}
                }
            }
            // Echo what was received, as the queue takes it.
            if let Some(c) = conn {
                while !backlog.is_empty() {
                    let n = backlog.len().min(64 * 1024);
                    if ws.send(c, &backlog[..n]).is_err() {
                        break;
                    }
                    backlog.drain(..n);
                }
            }
        };
        let mut out = String::new();
        std::io::Read::read_to_string(&mut child.0.stdout.take().unwrap(), &mut out).unwrap();
        let _ = std::fs::remove_file(&file);
        assert!(status.success(), "{backend:?}: {out}");
        assert_eq!(out.trim(), format!("ok {}", 1 << 20), "{backend:?}");
    }
}
