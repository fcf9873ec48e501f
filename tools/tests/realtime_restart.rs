//! `dtp serve` stopped by SIGTERM says goodbye to its realtime clients
//! (SPEC RT-8, RT-9): an SSE stream gets a last `event: control` block
//! with CLOSE RESTART and the end of its chunked body, a `realtime.v1`
//! WebSocket session CLOSE RESTART and the close code 1012, before the
//! connection ends — on both IO backends.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The documented demo credential of the default `[realtime]` section.
const TOKEN: &str = "dtp-demo-token";

/// A `dtp serve` child, killed if a failed test leaves it running.
struct Serve(Child);

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `dtp serve` on `backend`, and its realtime address.
fn serve(backend: &str) -> (Serve, SocketAddr) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_dtp"))
        .args(["serve", "--listen", "127.0.0.1:0", "--realtime-listen"])
        .args(["127.0.0.1:0", "--shards", "1", "--no-pin", "--no-admin"])
        .args(["--backend", backend])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let addr = loop {
        let line = lines.next().expect("serve exited").unwrap();
        if let Some(a) = line.strip_prefix("realtime http://") {
            break a.split('/').next().unwrap().parse().unwrap();
        }
    };
    std::thread::spawn(move || for _ in lines {});
    (Serve(child), addr)
}

/// Sends `request` and reads until `seen` holds `until`.
fn open(addr: SocketAddr, request: &str, until: &[u8]) -> (TcpStream, Vec<u8>) {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s.write_all(request.as_bytes()).unwrap();
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    while !contains(&seen, until) {
        let n = s.read(&mut buf).unwrap();
        assert!(n > 0, "closed early: {}", String::from_utf8_lossy(&seen));
        seen.extend_from_slice(&buf[..n]);
    }
    (s, seen)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

/// Everything `s` still sends, up to the orderly end of the connection.
fn rest(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    all
}

#[test]
fn sigterm_ends_sse_streams_and_websocket_sessions_with_close_restart() {
    for backend in ["uring", "epoll"] {
        let (mut child, addr) = serve(backend);
        let (mut sse, _) = open(
            addr,
            &format!(
                "GET /v1/streams/demo/sse HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
            ),
            b"retry:",
        );
        // A fixed key: this test checks the server's goodbye, not the
        // handshake (engine/tests/realtime does that).
        let (mut ws, _) = open(
            addr,
            &format!(
                "GET /v1/ws HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
                 Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
                 Sec-WebSocket-Protocol: realtime.v1\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
            ),
            b"\"WELCOME\"",
        );
        let ok = Command::new("kill")
            .args(["-TERM", &child.0.id().to_string()])
            .status()
            .unwrap();
        assert!(ok.success());

        let tail = String::from_utf8(rest(&mut sse)).unwrap();
        let close = "event: control\ndata: {\"type\":\"CLOSE\",\"category\":\"RESTART\"}\n\n";
        assert!(tail.contains(close), "{backend}: {tail:?}");
        assert!(
            tail.ends_with("\r\n0\r\n\r\n"),
            "{backend}: the last chunk: {tail:?}"
        );

        let tail = rest(&mut ws);
        let message = br#"{"type":"CLOSE","category":"RESTART"}"#;
        let mut frame = vec![0x81, message.len() as u8];
        frame.extend_from_slice(message);
        // The CLOSE message, then a close frame with 1012 (Service Restart).
        frame.extend_from_slice(&[0x88, 0x02, 0x03, 0xf4]);
        assert!(
            tail.ends_with(&frame),
            "{backend}: {:?}",
            String::from_utf8_lossy(&tail)
        );

        let deadline = Instant::now() + Duration::from_secs(30);
        while child.0.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "{backend}: serve did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
