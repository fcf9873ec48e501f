//! `dtp serve`, `dtp load` and `dtp bench` as a user runs them: the gateway
//! starts on its defaults, answers, exports /metrics, refuses a bad
//! configuration with the key named, and stops cleanly on SIGTERM.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a panic is the failure report"
)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn dtp() -> Command {
    Command::new(env!("CARGO_BIN_EXE_dtp"))
}

/// A running gateway and the addresses it printed.
struct Gateway {
    child: Child,
    addr: SocketAddr,
    metrics: Option<SocketAddr>,
    /// The realtime front end, when `--realtime-listen` was given.
    realtime: Option<SocketAddr>,
}

fn start(args: &[&str]) -> Gateway {
    let mut child = dtp()
        .arg("serve")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let want_metrics = !args.contains(&"--no-admin");
    let want_realtime = args.contains(&"--realtime-listen");
    let (mut addr, mut metrics, mut realtime) = (None, None, None);
    while let Some(Ok(line)) = lines.next() {
        if let Some(a) = line.strip_prefix("listening ") {
            addr = Some(a.parse().unwrap());
        } else if let Some(m) = line.strip_prefix("metrics http://") {
            metrics = Some(m.trim_end_matches("/metrics").parse().unwrap());
        } else if let Some(r) = line.strip_prefix("realtime http://") {
            realtime = Some(r.split('/').next().unwrap().parse().unwrap());
        }
        if addr.is_some()
            && (metrics.is_some() || !want_metrics)
            && (realtime.is_some() || !want_realtime)
        {
            break;
        }
    }
    std::thread::spawn(move || for _ in lines {});
    Gateway {
        child,
        addr: addr.expect("no listening line"),
        metrics,
        realtime,
    }
}

fn sigterm(child: &Child) {
    let ok = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn wait_exit(child: &mut Child, within: Duration) -> std::process::ExitStatus {
    let deadline = Instant::now() + within;
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        assert!(Instant::now() < deadline, "the gateway did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn http_get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    write!(s, "GET {path} HTTP/1.1\r\nhost: x\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

#[test]
fn serve_answers_exports_metrics_and_stops_on_sigterm() {
    let mut g = start(&["--listen", "127.0.0.1:0", "--shards", "2", "--no-pin"]);
    // One pingpong round trip through the load generator.
    let out = dtp()
        .args([
            "load",
            "--target",
            &g.addr.to_string(),
            "--connections",
            "4",
            "--duration",
            "0.5",
            "--warmup",
            "0",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("throughput"), "{text}");
    // Other payload sizes, both workloads: every answer is checked by the client.
    for (workload, payload) in [("pingpong", "5000"), ("stream", "3000")] {
        let out = dtp()
            .args([
                "load",
                "--target",
                &g.addr.to_string(),
                "--workload",
                workload,
                "--payload",
                payload,
            ])
            .args(["--connections", "2", "--duration", "0.3", "--warmup", "0"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{workload}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(!text.contains("problems"), "{workload}: {text}");
    }

    let metrics = http_get(g.metrics.unwrap(), "/metrics");
    assert!(metrics.starts_with("HTTP/1.1 200 OK"), "{metrics}");
    assert!(metrics.contains("dtp_backend_info{backend="), "{metrics}");
    let frames: u64 = metrics
        .lines()
        .filter(|l| l.starts_with("dtp_frames_in_total{"))
        .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
        .sum();
    assert!(frames > 0, "{metrics}");
    // SPEC MEM-3: the heap outside the pools is a figure, RSS stands
    // beside it, and the ceiling claim says it does not hold.
    let gauge = |name: &str| -> u64 {
        let line = metrics.lines().find(|l| l.starts_with(&format!("{name} ")));
        line.and_then(|l| l.rsplit(' ').next()?.parse().ok())
            .unwrap_or_else(|| panic!("no {name}: {metrics}"))
    };
    assert!(gauge("dtp_heap_bytes") > 0);
    assert!(gauge("dtp_heap_bytes_peak") >= gauge("dtp_heap_bytes"));
    assert!(gauge("dtp_process_resident_bytes") > 0);
    assert_eq!(gauge("dtp_memory_ceiling_holds"), 0);
    assert!(
        metrics.contains("dtp_pool_bytes_reserved{shard=\"0\"} "),
        "{metrics}"
    );
    assert!(http_get(g.metrics.unwrap(), "/nope").starts_with("HTTP/1.1 404"));

    // An idle client is closed by the drain (accepted or not yet), and the
    // gateway exits 0.
    let mut idle = TcpStream::connect(g.addr).unwrap();
    idle.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    sigterm(&g.child);
    let status = wait_exit(&mut g.child, Duration::from_secs(20));
    assert!(status.success(), "{status:?}");
    let mut rest = Vec::new();
    assert_eq!(idle.read_to_end(&mut rest).unwrap_or(0), 0);
}

#[test]
fn heartbeats_are_acked_by_the_control_thread() {
    use dtp_codec::{Beat, Body, ControlMessage, Heartbeat, Limits, LogicalFrame};
    let mut g = start(&["--listen", "127.0.0.1:0", "--no-admin", "--no-pin"]);
    let mut c = TcpStream::connect(g.addr).unwrap();
    let beat = Beat {
        session_id: uuid::Uuid::from_u128(42),
        sequence_number: 7,
    };
    let hb = LogicalFrame::plain(
        0,
        Body::Control(ControlMessage::Heartbeat(Heartbeat { beats: vec![beat] })),
    );
    c.write_all(&hb.to_bytes(&Limits::default()).unwrap())
        .unwrap();
    let frame = dtp_test_kit::read_frame(&mut c, Duration::from_secs(10));
    match frame.body {
        Body::Control(ControlMessage::HeartbeatAck(a)) => assert_eq!(a.beats, vec![beat]),
        other => panic!("{other:?}"),
    }
    sigterm(&g.child);
    assert!(wait_exit(&mut g.child, Duration::from_secs(20)).success());
}

#[test]
fn serve_runs_on_the_epoll_backend_when_asked() {
    let mut child = dtp()
        .env("DTP_IO_BACKEND", "epoll")
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--no-admin",
            "--no-pin",
            "--shards",
            "1",
        ])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let mut backend = String::new();
    for line in lines.by_ref() {
        let line = line.unwrap();
        if line.starts_with("backend ") {
            backend = line;
            break;
        }
    }
    assert!(
        backend.starts_with("backend epoll (DTP_IO_BACKEND=epoll)"),
        "{backend}"
    );
    sigterm(&child);
    assert!(wait_exit(&mut child, Duration::from_secs(20)).success());
}

#[test]
fn a_bad_configuration_is_refused_naming_the_key() {
    let dir = std::env::temp_dir().join(format!("dtp-serve-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for (text, key) in [
        (
            "[io]\nbackend = \"uring\"\nringentries = 64\n",
            "ringentries",
        ),
        ("[io]\nrecv_buffers = 100\n", "recv_buffers"),
        ("[limits]\nmax_frame_len = 99999999\n", "max_frame_len"),
        ("[engine]\nlisten = []\n", "engine.listen"),
        ("[io]\ntcp_congestion = \"a b\"\n", "tcp_congestion"),
    ] {
        let path = dir.join("bad.toml");
        std::fs::write(&path, text).unwrap();
        let out = dtp()
            .args(["serve", "--config", path.to_str().unwrap()])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{text}");
        let err = String::from_utf8(out.stderr).unwrap();
        assert!(
            err.starts_with("error: BAD_CONFIG") && err.contains(key),
            "{text}: {err}"
        );
    }
    // A congestion control the kernel does not have fails at start-up.
    let path = dir.join("cc.toml");
    std::fs::write(&path, "[io]\ntcp_congestion = \"nosuch\"\n").unwrap();
    let out = dtp()
        .args(["serve", "--no-admin", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("tcp_congestion \"nosuch\": not available"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
    // The defaults print as TOML naming every section.
    let out = dtp().args(["serve", "--print-config"]).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("[engine]") && text.contains("recv_buffers"),
        "{text}"
    );
}

#[test]
fn load_against_nothing_fails_clearly() {
    // A port nothing listens on: bind, learn the port, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let out = dtp()
        .args([
            "load",
            "--target",
            &format!("127.0.0.1:{port}"),
            "--duration",
            "0.2",
            "--warmup",
            "0",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8(out.stderr).unwrap();
    assert!(
        err.contains("no connection") && err.contains("refused"),
        "{err}"
    );
    let out = dtp().args(["load", "--window", "100"]).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
}

/// The documented demo credential of the default `[realtime]` section.
const DEMO_TOKEN: &str = "dtp-demo-token";

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

/// SPEC RT-8, RT-9: `dtp serve` stopped by SIGTERM says goodbye to its
/// realtime clients — an SSE stream gets a last `event: control` block with
/// CLOSE RESTART and the end of its chunked body, a `realtime.v1` session
/// CLOSE RESTART and close code 1012 — before the connection ends, on both
/// IO backends.
#[test]
fn sigterm_ends_sse_streams_and_websocket_sessions_with_close_restart() {
    for backend in ["uring", "epoll"] {
        let mut g = start(&[
            "--listen",
            "127.0.0.1:0",
            "--realtime-listen",
            "127.0.0.1:0",
            "--shards",
            "1",
            "--no-pin",
            "--no-admin",
            "--backend",
            backend,
        ]);
        let addr = g.realtime.unwrap();
        let (mut sse, _) = open(
            addr,
            &format!(
                "GET /v1/streams/demo/sse HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {DEMO_TOKEN}\r\n\r\n"
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
                 Sec-WebSocket-Protocol: realtime.v1\r\nAuthorization: Bearer {DEMO_TOKEN}\r\n\r\n"
            ),
            b"\"WELCOME\"",
        );
        sigterm(&g.child);

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

        assert!(wait_exit(&mut g.child, Duration::from_secs(30)).success());
    }
}
